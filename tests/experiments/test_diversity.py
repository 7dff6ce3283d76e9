"""zoo.experiments.analysis.diversity: disagreement normalised by (1 - acc) (rank-1 paper section 3.6, Fig. 6) on constructed members,
and the per-component predictions of a rank-1 posterior."""
import jax
import numpy as np
import optax
import pytest

import models
from inference.fit import ChunkHook
from zoo.experiments.analysis.diversity import component_probs, diversity_table, member_scores, plot_diversity
from inference import fit
from inference.rank1_mixture import batch_ensemble
from base.errors import InputError
from models.rank1 import rank1_likelihood, rank1_mlp, rank1_prior


def _onehot(labels, c=3):
    return np.eye(c)[np.asarray(labels)] * 0.9 + 0.1 / c


def test_identical_members_have_zero_disagreement():
    y = np.array([0, 1, 2, 0, 1])
    members = np.stack([_onehot([0, 1, 2, 1, 1])] * 4)  # 4 identical members, 80 % accurate
    s = member_scores(members, y)
    assert s["disagreement"] == 0.0 and s["diversity"] == 0.0
    assert s["accuracy"] == pytest.approx(0.8) and s["member_accuracy"] == pytest.approx(0.8)


def test_members_that_always_disagree_are_normalised_by_the_error():
    # 3 members, 3 classes: at every point each member votes another class -> every pair disagrees (1.0).
    y = np.array([0, 0, 0, 0])
    members = np.stack([_onehot([0, 0, 0, 0]), _onehot([1, 1, 1, 1]), _onehot([2, 2, 2, 2])])
    members[0, 3] = _onehot([1])[0]  # point 3: votes 1, 1, 2 -> 2 of 3 pairs disagree
    members[0, :3] = [0.98, 0.01, 0.01]  # the average keeps class 0 on points 0-2
    s = member_scores(members, y)
    disagreement = (3 * 1.0 + 2 / 3) / 4
    assert s["disagreement"] == pytest.approx(disagreement)
    assert s["accuracy"] == pytest.approx(0.75)  # point 3's average says class 1
    assert s["diversity"] == pytest.approx(disagreement / 0.25)


def test_member_scores_refuses_two_dimensional_input():
    with pytest.raises(InputError, match="member_probs"):
        member_scores(np.ones((5, 3)) / 3, np.zeros(5, int))


@pytest.fixture(scope="module")
def k1_batch_ensemble():
    """K = 1 rank-1 MLP 3-4-2 with BatchEnsemble's Delta factors, 6 Adam steps (the weights move off init),
    with `inference.fit`'s on_chunk checkpoints every 2 steps."""
    model = models.bnn(rank1_mlp([4], 2, 1), rank1_prior(), rank1_likelihood(models.likelihoods.categorical(), 1),
                       feature_shape=(3,))
    x = np.asarray(jax.random.normal(jax.random.PRNGKey(1), (20, 3)), np.float32)
    y = (x[:, 0] > 0).astype(np.int32)
    seen = []
    post = fit(model, batch_ensemble(model, sign_init=-0.5), (x, y), steps=6, batch_size=20, chunk_size=2,
               optimizer=optax.adam(1e-2), progress=False,
               callbacks=[ChunkHook(lambda step, p: seen.append((step, p)))])
    return post, x, y, seen


def test_fit_on_chunk_gives_consecutive_checkpoints(k1_batch_ensemble):
    post, x, _, seen = k1_batch_ensemble
    assert [step for step, _ in seen] == [2, 4, 6]
    first, last = seen[0][1], seen[-1][1]
    for name, value in post.params.items():
        np.testing.assert_array_equal(np.asarray(last.params[name]), np.asarray(value))
    assert any(not np.allclose(np.asarray(first.params[k]), np.asarray(v)) for k, v in post.params.items())
    np.testing.assert_allclose(last.predict(x, num_samples=1), post.predict(x, num_samples=1))


def test_k1_delta_rank1_is_the_deterministic_network_with_w_times_s_r_transposed(k1_batch_ensemble):
    post, x, _, _ = k1_batch_ensemble
    p = {k: np.asarray(v) for k, v in post.median().items()}
    h = x
    for i in range(2):
        layer = f"rank1_mlp/rank1_dense_{i}"
        w_eff = p[f"{layer}/w"] * np.outer(p[f"{layer}/alpha"][0], p[f"{layer}/gamma"][0])  # W o s r^T
        h = h @ w_eff + p[f"{layer}/b"][0]
        h = np.maximum(h, 0) if i == 0 else h
    expected = np.exp(h - h.max(1, keepdims=True))
    expected /= expected.sum(1, keepdims=True)
    assert not np.allclose(p["rank1_mlp/rank1_dense_0/alpha"], 1.0)  # a real test of the factors
    np.testing.assert_allclose(post.predict(x, num_samples=1)[0], expected, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(component_probs(post, x)[0], expected, rtol=1e-4, atol=1e-6)


def test_component_probs_average_to_the_mixture_prediction():
    model = models.bnn(rank1_mlp([4], 2, 3), rank1_prior(), rank1_likelihood(models.likelihoods.categorical(), 3),
                       feature_shape=(3,))
    x = np.asarray(jax.random.normal(jax.random.PRNGKey(2), (10, 3)), np.float32)
    y = (x[:, 1] > 0).astype(np.int32)
    post = fit(model, batch_ensemble(model), (x, y), steps=3, batch_size=10, progress=False)
    members = component_probs(post, x)
    assert members.shape == (3, 10, 2)
    np.testing.assert_allclose(members.mean(0), post.predict(x, num_samples=1)[0], rtol=1e-5, atol=1e-6)
    table = diversity_table({"batch_ensemble": [(3, post)]}, x, y)
    assert list(table["method"]) == ["batch_ensemble"] and 0 <= table["disagreement"][0] <= 1
    assert plot_diversity(table).axes[0].get_xlabel() == "accuracy (%)"


def test_component_probs_refuses_a_posterior_without_rank1_likelihood(k1_batch_ensemble):
    with pytest.raises(InputError, match="rank-1"):
        component_probs(object(), k1_batch_ensemble[1])
