"""Every architecture of the catalogue trains a few mean-field SVI steps and takes a few NUTS draws on tiny inputs,
from the same model object (the inputs and widths of test_architectures.py, which trains each under its own
paper's guide; two files so that the two halves can run on two workers).

Mean field and NUTS run on one architecture of each kind the sampler sees differently: a plain MLP (moons_mlp,
deep_linear), a convolution (lenet_cnn), an embedding and recurrence (lstm). NUTS on a batch-norm network: the batch-norm MLP of
tests/inference/test_compile_once.py. lenet5, vgg, resnet18 and wide_resnet add no kind of their own (convolutions;
residual blocks with batch norm, whose statistics travel as state: test_architectures.py checks it) and train under
their papers' guides in test_architectures.py."""

import numpy as np
import pytest
from test_architectures import tiny_entry

import inference


NUTS_KINDS = ("deep_linear", "lenet_cnn", "lstm", "moons_mlp")


@pytest.mark.parametrize("name", NUTS_KINDS)
def test_architecture_trains_and_samples(name):
    entry = tiny_entry(name)
    post = inference.fit(entry.model, inference.mean_field(entry.model), entry.train, steps=3, batch_size=4,
                         progress=False)
    assert np.all(np.isfinite(post.losses)) and post.losses.shape == (3,)
    probs = post.predict(entry.test.x, num_samples=2)
    assert probs.shape == (2, 4, entry.train.num_classes)
    np.testing.assert_allclose(probs.sum(-1), 1.0, rtol=1e-4)
    mcmc = inference.nuts(entry.model, entry.train, init=post, num_chains=2, num_warmup=2, draws_per_chain=2,
                          max_tree_depth=2, progress=False)
    assert mcmc.model is post.model
    assert next(iter(mcmc.samples.values())).shape[:2] == (2, 2)
    assert mcmc.predict(entry.test.x, num_samples=4).shape == (4, 4, entry.train.num_classes)
