"""Every architecture of the catalogue trains a few SVI steps under its own paper's guide, on tiny inputs (widths
shrunk: compile time, not FLOPs, is the cost here). Mean field and NUTS on every architecture, from the same model
object: tests/zoo/test_architectures_nuts.py (a file of its own, so that the two halves can run on two workers)."""

import numpy as np
import pytest

import inference
import zoo

RNG = np.random.default_rng(0)
IMAGES = RNG.uniform(size=(12, 8, 8, 3)).astype(np.float32)
LABELS = RNG.integers(0, 3, 12).astype(np.int32)
TOKENS = RNG.integers(0, 50, (12, 6)).astype(np.float32)

TINY = {
    "lenet5": (IMAGES, {"channels": (2, 3), "hidden": 8}),
    "lenet_cnn": (IMAGES, {"channels": (2, 3), "hidden": 8}),
    "vgg": (IMAGES, {"widths": (2, 4), "depths": (1, 1), "hidden": 4}),
    "resnet18": (IMAGES, {"width_multiplier": 1 / 32, "blocks": (1, 1, 1, 1)}),
    "wide_resnet": (IMAGES, {"depth": 10, "k": 1}),
    "lstm": (TOKENS, {"vocab_size": 50, "embed_dim": 4, "hidden": 4}),
    "moons_mlp": (RNG.normal(size=(12, 2)).astype(np.float32), {"depth": 2, "budget": 60}),
    "deep_linear": (RNG.normal(size=(12, 5)).astype(np.float32), {"depth": 3, "width": 4}),
}


# each architecture's own paper's guide: (extra entry kwargs, guide name, guide kwargs)
PAPER_GUIDE = {
    "lenet5": ({}, "zero_mean", {"variance_sites": ["lenet5/dense1/w"]}),           # variance networks
    "vgg": ({}, "variance_layers", {"variance_sites": ["vgg/dense1/w"]}),             # variance networks
    "lenet_cnn": ({}, "k_tied", {"k": 2}),                                        # k-tied (conv reshaped)
    "resnet18": ({}, "k_tied", {"k": 2}),                                         # k-tied
    "lstm": ({"num_components": 2}, "rank1_mixture", {"family": "normal"}),          # rank-1 LSTM
    "wide_resnet": ({"num_components": 2}, "rank1_mixture", {"family": "cauchy"}),   # rank-1 WRN
}
# moons_mlp and deep_linear (Liberty or Depth) are trained under their paper's guide, mean field, by
# test_architectures_nuts.py


def tiny_entry(name, **extra):
    """The catalogue entry `name` on its tiny inputs (8 training, 4 test examples)."""
    x, kwargs = TINY[name]
    y = LABELS if name != "moons_mlp" else LABELS % 2
    return zoo.get(name, data=(x[:8], y[:8], x[8:], y[8:]), **kwargs, **extra)


@pytest.mark.parametrize("name", sorted(PAPER_GUIDE))
def test_architecture_under_its_papers_guide(name):
    extra, guide_name, guide_kwargs = PAPER_GUIDE[name]
    entry = tiny_entry(name, **extra)
    guide = inference.make_guide(guide_name, entry.model, **guide_kwargs)
    post = inference.fit(entry.model, guide, entry.train, steps=2, batch_size=4, progress=False)
    assert np.all(np.isfinite(post.losses))
    probs = post.predict(entry.test.x, num_samples=2)
    assert probs.shape == (2, 4, entry.train.num_classes)  # rank-1: K components averaged per draw
    np.testing.assert_allclose(probs.sum(-1), 1.0, rtol=1e-4)
    if entry.model.is_stateful(entry.train.feature_shape):  # resnet18, wide_resnet
        assert post.state is not None  # batch-norm statistics travel as state, not as random variables
        assert not any("mean_ema" in site or "var_ema" in site for site in entry.model.site_shapes(entry.train.x[:1]))
