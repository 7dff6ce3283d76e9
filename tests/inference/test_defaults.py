"""The documented defaults (README "Defaults that work", docs/defaults.md) are what `fit` and the guides use:
Adam cosine-decayed 1e-2 -> 1e-4 over `steps`, sigma init 0.01, the sigma cap c / sqrt(fan_in) with c = 1.5, and
a default fit compiles once per number of steps."""

import inspect
import os

import numpy as np
import pytest

import inference
import zoo
from inference.fit import DEFAULT_FINAL_LR, DEFAULT_LR, default_optimizer
from inference.k_tied import KTiedFamily
from inference.mean_field import NormalFamily

README = os.path.join(os.path.dirname(__file__), "..", "..", "README.md")


def test_default_learning_rate_schedule():
    import optax

    steps = 400
    record = default_optimizer(steps)
    opt = record.transformation()
    params = {"w": np.zeros(1, np.float32)}
    state = opt.init(params)
    # the step Adam takes on a constant gradient is the rate itself (m / sqrt(v) = 1)
    sizes = []
    for _ in range(steps):
        updates, state = opt.update({"w": np.ones(1, np.float32)}, state, params)
        sizes.append(-float(updates["w"][0]))
    assert (DEFAULT_LR, DEFAULT_FINAL_LR) == (1e-2, 1e-4)
    assert sizes[0] == pytest.approx(1e-2, rel=1e-3)
    assert sizes[steps // 2] == pytest.approx(0.5 * (1e-2 + 1e-4), rel=2e-2)  # cosine: half way at the middle
    assert sizes[-1] == pytest.approx(1e-4, rel=0.05)
    assert isinstance(opt, optax.GradientTransformation)
    assert record == inference.optimizers.cosine_adam(1e-2, decay_steps=steps, alpha=0.01)  # a record: data, no closure


def test_guides_start_sigma_at_0_01():
    assert NormalFamily().init_scale == 1e-2
    assert KTiedFamily(2).init_scale == 1e-2
    for factory in (inference.mean_field, inference.k_tied.k_tied):
        assert inspect.signature(factory).parameters["init_scale"].default == 1e-2


@pytest.fixture(scope="module")
def entry():
    return zoo.get("mlp", data="two_moons", hidden=(4,), data_kwargs={"n": 100})


def test_fit_uses_the_default_optimizer_and_compiles_once(entry):
    kw = dict(steps=30, batch_size=32, chunk_size=30, progress=False, seed=3)
    first = inference.fit(entry.model, inference.mean_field(entry.model), entry.train, **kw)
    explicit = inference.fit(entry.model, inference.mean_field(entry.model), entry.train,
                             optimizer=default_optimizer(30), **kw)
    assert explicit.info.traces == 0  # the same structure: the default is default_optimizer(steps)
    other = inference.fit(entry.model, inference.mean_field(entry.model), entry.train, **{**kw, "steps": 45})
    assert other.info.traces == 0  # another number of steps: the decay steps are data
    np.testing.assert_array_equal(first.losses, explicit.losses)
    scale = next(v for k, v in first.params.items() if k.endswith("_scale"))
    assert not np.allclose(scale, 1e-2)  # the sigmas have moved from their start


def test_readme_states_the_defaults():
    with open(README, encoding="utf-8") as f:
        text = f.read()
    section = text.split("### Defaults that work", 1)[1].split("\n## ", 1)[0]
    section = " ".join(section.split())
    for stated in ("cosine-decayed from 1e-2 to 1e-4", "sigma init 0.01", "c / sqrt(fan_in), c = 1.5",
                   "docs/defaults.md", "post.info.collapsed"):
        assert stated in section


def test_the_sigma_cap_limits_q_and_is_the_identity_for_small_scales():
    import jax.numpy as jnp

    from inference.families import DEFAULT_SCALE_CAP, capped, scale_limit
    from inference.sites import Site
    from models.priors import fan_in

    assert DEFAULT_SCALE_CAP == 1.5 and fan_in("w", (784, 400)) == 784 and fan_in("w", (5, 5, 20, 50)) == 500
    assert fan_in("b", (400,)) == 1
    limit = 1.5 / 28.0
    scales = jnp.array([1e-4, limit / 6, limit, 10.0])
    sd = np.asarray(capped(scales, limit))
    # tanh(x) / x = 1 - x² / 3 + ...: the identity to 1e-6 at 1e-4, to 1 % at a sixth of the limit
    assert sd[0] == pytest.approx(1e-4, rel=1e-5) and sd[1] == pytest.approx(limit / 6, rel=0.01)
    assert sd[2] == pytest.approx(limit * np.tanh(1.0), rel=1e-5) and limit * 0.999 < sd[3] <= limit * (1 + 1e-6)
    site = Site("w", (784, 400), None, None, jnp.zeros((784, 400)))
    big = {"loc": jnp.zeros((784, 400)), "scale": jnp.ones((784, 400))}  # the N(0, 1) prior's sd
    _, var = NormalFamily().moments(site, big)
    assert float(var.max()) == pytest.approx((limit * np.tanh(28.0 / 1.5)) ** 2, rel=1e-5)
    _, var = NormalFamily(scale_cap=None).moments(site, big)
    assert float(var.min()) == 1.0  # uncapped: the free scale is the sd
    u = v = jnp.full((784, 2), 1.0), jnp.full((400, 2), 1.0)
    _, var = KTiedFamily(2).moments(site, {"loc": big["loc"], "u": u[0], "v": v[1]})
    assert float(var.max()) == pytest.approx(limit ** 2, rel=1e-5)  # U Vᵀ = 2 everywhere: at the cap too
    with pytest.raises(ValueError, match="scale_cap"):
        NormalFamily(scale_cap=0.0)
    # one fan_in rule, the priors' (`models.priors.fan_in`): an embedding table (vocab, d) and a rank-1
    # per-component bias (K, out) have fan_in 1, so their limit is c (the shape-only rule gave c / sqrt(vocab), c / sqrt(K))
    embedding = Site("lstm/~/embed/embeddings", (20_000, 128), None, None, jnp.zeros((20_000, 128)))
    rank1_bias = Site("r1/b", (4, 10), None, None, jnp.zeros((4, 10)))
    assert scale_limit(embedding, 1.5) == scale_limit(rank1_bias, 1.5) == 1.5 and scale_limit(site, 1.5) == limit


def test_a_bias_takes_its_layers_limit_and_old_checkpoints_keep_their_own(entry):
    """A bias is one more weight on each output unit: its sd limit is its kernel's c / sqrt(fan_in), not c (the
    rule before, under which every hidden unit's bias could carry noise of sd near the N(0, 1) prior's);
    `bias_limit="own"` and a checkpoint saved without the key keep the old limit."""
    import jax.numpy as jnp

    from inference.sites import site_table
    from models.priors import layer_fan_in

    shapes = {"mlp/~/linear_0/w": (784, 400), "mlp/~/linear_0/b": (400,), "bn/~/offset": (400,),
              "lstm/w_ih": (8, 16), "lstm/w_hh": (4, 16), "lstm/b": (16,), "r1/b": (4, 10)}
    assert layer_fan_in("mlp/~/linear_0/b", shapes) == 784 and layer_fan_in("mlp/~/linear_0/w", shapes) == 784
    assert layer_fan_in("bn/~/offset", shapes) == 1 and layer_fan_in("r1/b", shapes) == 1
    assert layer_fan_in("lstm/b", shapes) == 12  # its gates sum over the input and the recurrent kernel
    table = site_table(entry.model, np.asarray(entry.train.x[:2]))
    bias = next(s for n, s in table.items() if n.endswith("/b"))
    kernel = table[bias.name[:-1] + "w"]
    assert bias.layer_fan_in == kernel.shape[0] == kernel.layer_fan_in
    big = {"loc": jnp.zeros(bias.shape), "scale": jnp.full(bias.shape, 10.0)}
    _, var = NormalFamily().moments(bias, big)
    assert float(var.max()) == pytest.approx(1.5 ** 2 / kernel.shape[0], rel=1e-4)
    _, var = NormalFamily(bias_limit="own").moments(bias, big)
    assert float(var.max()) == pytest.approx(1.5 ** 2, rel=1e-4)
    with pytest.raises(ValueError, match="bias_limit"):
        NormalFamily(bias_limit="kernel")
    # a saved config without the keys (a pre-release checkpoint's) was fitted under other rules: refused on load
    from inference.checkpoint import check_guide_config
    from base.errors import CheckpointError

    with pytest.raises(CheckpointError, match=r"'ck/posterior.json'.*mean_field guide config lacks \['bias_limit'\]: "
                                              r"it was written by a pre-release version"):
        check_guide_config("ck", {"name": "mean_field", "scale_cap": 1.5})
    with pytest.raises(CheckpointError, match=r"k_tied guide config lacks \['scale_cap', 'bias_limit'\]"):
        check_guide_config("ck", {"name": "k_tied", "k": 2})
    check_guide_config("ck", {"name": "mean_field", "scale_cap": 1.5, "bias_limit": "layer"})  # today's: accepted
    assert inference.mean_field(entry.model).config["bias_limit"] == "layer"
