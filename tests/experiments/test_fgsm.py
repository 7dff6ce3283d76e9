"""zoo.experiments.analysis.fgsm: a fast-sign step on a linear model moves the attacked logit by eps * ||w||_1."""
import jax.numpy as jnp
import numpy as np

from zoo.experiments.analysis.fgsm import entropy, fgsm_step, iterative_fgsm


def test_one_step_moves_a_linear_logit_by_eps_times_the_l1_norm():
    w = jnp.array([[0.5, -1.0], [-2.0, 0.25], [1.5, 0.0], [-0.1, 3.0]])  # (D=4, C=2)
    x = jnp.array([0.3, -0.2, 0.1, 0.7])
    eps = 0.05
    for c in range(2):
        def logit(v):
            return v @ w[:, c]
        moved = logit(fgsm_step(logit, x, eps)) - logit(x)
        # sign(0) = 0 for the zero weight: it neither moves the input nor counts in the norm
        np.testing.assert_allclose(float(moved), eps * float(jnp.sum(jnp.abs(w[:, c]))), rtol=1e-6)


def test_iterative_attack_on_a_linear_softmax_succeeds_and_records_entropy():
    w = jnp.array([[1.0, -1.0], [0.5, -0.5]])
    def predict(x):
        return __import__("jax").nn.softmax(x @ w, axis=-1)
    x = jnp.array([[2.0, 1.0], [1.0, 1.0]])  # class 0 at the start
    table = iterative_fgsm(predict, x, targets=np.array([1, 1]), eps=0.5, iterations=4)
    assert table["iteration"].tolist() == [0, 1, 2, 3, 4]
    assert table["success_rate"].iloc[0] == 0.0 and table["success_rate"].iloc[-1] == 1.0
    np.testing.assert_allclose(table["mean_entropy"].iloc[0], float(entropy(predict(x)).mean()), rtol=1e-6)
    np.testing.assert_allclose(float(entropy(jnp.array([[0.5, 0.5, 0.0]]))[0]), np.log(2.0), rtol=1e-6)
