"""The zoo's Haiku architectures: output shapes, parameter counts, site names, batch-norm state."""

import haiku as hk
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from models.networks.budget_mlp import mlp_param_count, widest_mlp_under_budget
from models.networks.counts import param_count, param_shapes
from models.networks.layers import on_flat_images
from models.networks.lenet5 import lenet5
from models.networks.lenet_cnn import lenet_cnn
from models.networks.lstm import lstm_classifier
from models.networks.mlp import mlp
from models.networks.resnet import resnet18
from models.networks.vgg import vgg
from models.networks.wide_resnet import wide_resnet

KEY = jax.random.key(0)


def conv_count(k, c_in, c_out, bias=True):
    return k * k * c_in * c_out + (c_out if bias else 0)


def dense_count(d_in, d_out):
    return d_in * d_out + d_out


def run(network_fn, x, is_training=False):
    """Init and apply (transform_with_state) in one jit -> (output, params, state, new_state)."""
    f = hk.transform_with_state(network_fn)

    @jax.jit
    def init_apply(x):
        params, state = f.init(KEY, x)
        out, new_state = f.apply(params, state, None, x, is_training=is_training)
        return out, params, state, new_state

    return init_apply(x)


def abstract_output(network_fn, x, is_training):
    """Output ShapeDtypeStruct of init + apply, traced with jax.eval_shape (nothing compiled)."""
    f = hk.transform_with_state(network_fn)

    def init_apply(x):
        params, state = f.init(KEY, x)
        return f.apply(params, state, None, x, is_training=is_training)[0]

    return jax.eval_shape(init_apply, x)


# Tiny configurations: (network, input, expected output shape).
TINY = {
    "lenet5": (lenet5(num_outputs=10, channels=(2, 3), hidden=8, padding="SAME"),
               np.ones((2, 8, 8, 1), np.float32), (2, 10)),
    "lenet5_valid_28": (lenet5(channels=(2, 3), hidden=8), np.ones((2, 28, 28, 1), np.float32),
                        (2, 10)),
    "lenet_cnn": (lenet_cnn(num_outputs=5, channels=(2, 3), hidden=8),
                  np.ones((2, 8, 8, 3), np.float32), (2, 5)),
    "vgg": (vgg(num_outputs=4, width_multiplier=1 / 32), np.ones((2, 8, 8, 3), np.float32), (2, 4)),
    "resnet18": (resnet18(num_outputs=3, width_multiplier=1 / 16),
                 np.ones((2, 8, 8, 3), np.float32), (2, 3)),
    "wide_resnet": (wide_resnet(num_outputs=3, depth=10, k=1), np.ones((2, 8, 8, 3), np.float32),
                    (2, 3)),
    "lstm": (lstm_classifier(vocab_size=11, embed_dim=4, hidden=5),
             np.array([[0, 0, 1, 5], [1, 3, 10, 2]], np.int32), (2, 1)),
    "rank1_lstm": (lstm_classifier(vocab_size=11, embed_dim=4, hidden=5, num_components=3),
                   np.array([[0, 0, 1, 5], [1, 3, 10, 2]], np.int32), (6, 1)),
    # rank-1 versions (K = 3 components): outputs have K N rows
    "rank1_lenet5": (lenet5(channels=(2, 3), hidden=8, padding="SAME", num_components=3),
                     np.ones((2, 8, 8, 1), np.float32), (6, 10)),
    "rank1_wide_resnet": (wide_resnet(num_outputs=3, depth=10, k=1, num_components=3),
                          np.ones((2, 8, 8, 3), np.float32), (6, 3)),
    "rank1_resnet18": (resnet18(num_outputs=3, width_multiplier=1 / 16, num_components=2),
                       np.ones((2, 8, 8, 3), np.float32), (4, 3)),
    "rank1_vgg": (vgg(num_outputs=4, width_multiplier=1 / 32, num_components=2),
                  np.ones((2, 8, 8, 3), np.float32), (4, 4)),
}


@pytest.mark.parametrize("is_training", [False, True])
@pytest.mark.parametrize("name", sorted(TINY))
def test_output_shape(name, is_training):
    network_fn, x, expected = TINY[name]
    out = abstract_output(network_fn, x, is_training)
    assert out.shape == expected and out.dtype == jnp.float32


def test_lenet5_count_matches_hand_formula():
    expected = (conv_count(5, 1, 20) + conv_count(5, 20, 50) + dense_count(4 * 4 * 50, 500)
                + dense_count(500, 10))
    assert expected == 431_080
    assert param_count(lenet5(), (1, 28, 28, 1)) == expected
    # 8x8 digits with "same" padding: 8 -> 4 -> 2, flattened 2*2*50.
    assert param_count(lenet5(padding="SAME"), (1, 8, 8, 1)) == expected - 400_000 + 100_000


def test_mlp_count_matches_hand_formula():
    expected = dense_count(784, 400) + dense_count(400, 400) + dense_count(400, 10)
    assert param_count(mlp((400, 400), 10), (1, 784)) == expected == 478_410


def test_lenet_cnn_count_matches_k_tied_table_1():
    expected = (conv_count(3, 3, 32) + conv_count(3, 32, 64) + dense_count(8 * 8 * 64, 512)
                + dense_count(512, 100))
    assert param_count(lenet_cnn(), (1, 32, 32, 3)) == expected == 2_168_356


def test_lstm_count_matches_hand_formula():
    v, e, h = 20_000, 128, 128
    expected = v * e + (e * 4 * h + 4 * h) + h * 4 * h + dense_count(h, 1)
    assert param_count(lstm_classifier(), (1, 80), jnp.int32) == expected == 2_691_713


@pytest.mark.parametrize("network_fn, expected", [
    (resnet18(), 11_173_962),            # the usual CIFAR ResNet-18 count
    (wide_resnet(k=10), 36_479_194),     # WRN-28-10, 36.5M (rank-1 paper Table 2: 146M for 4)
    (vgg(), 14_987_722),                 # VGG-like (Zagoruyko), CIFAR-10
])
def test_big_network_counts(network_fn, expected):
    assert param_count(network_fn, (1, 32, 32, 3)) == expected


def test_site_names_are_stable_module_paths():
    assert sorted(param_shapes(lenet5(), (1, 28, 28, 1))) == [
        "lenet5/conv1/b", "lenet5/conv1/w", "lenet5/conv2/b", "lenet5/conv2/w",
        "lenet5/dense1/b", "lenet5/dense1/w", "lenet5/dense2/b", "lenet5/dense2/w"]
    shapes = param_shapes(lstm_classifier(), (1, 80), jnp.int32)
    assert shapes["lstm_classifier/lstm/kernel/w"] == (128, 512)
    assert shapes["lstm_classifier/lstm/recurrent_kernel/w"] == (128, 512)
    assert "lstm_classifier/lstm/recurrent_kernel/b" not in shapes
    vgg_sites = param_shapes(vgg(), (1, 32, 32, 3))
    # the variance-networks paper's variance layers: last three convolutions and the first dense
    assert {"vgg/conv5_1/w", "vgg/conv5_2/w", "vgg/conv5_3/w", "vgg/dense1/w"} <= set(vgg_sites)
    assert vgg_sites["vgg/conv5_3/w"] == (3, 3, 512, 512)


def test_batch_norm_statistics_are_state_not_params():
    network_fn = lenet5(channels=(2, 3), hidden=4, padding="SAME", batch_norm=True)
    x = np.random.default_rng(0).normal(size=(4, 8, 8, 1)).astype(np.float32)
    f = hk.transform_with_state(network_fn)

    @jax.jit
    def init_train_eval(x):
        params, state = f.init(KEY, x)
        _, train_state = f.apply(params, state, None, 3.0 * x + 1.0, is_training=True)
        out, eval_state = f.apply(params, state, None, x, is_training=False)
        return state, train_state, out, eval_state

    state, train_state, out, eval_state = init_train_eval(x)
    flat_params = param_shapes(network_fn, x.shape)
    assert not any("ema" in k for k in flat_params)
    assert {"lenet5/bn_conv1/scale", "lenet5/bn_conv1/offset"} <= set(flat_params)
    ema = "lenet5/bn_conv1/~/mean_ema"
    assert ema in state
    # training updates the moving averages (new batch statistics); evaluation leaves them alone
    assert not np.allclose(train_state[ema]["average"], state[ema]["average"])
    np.testing.assert_array_equal(eval_state[ema]["average"], state[ema]["average"])
    assert out.shape == (4, 10) and np.all(np.isfinite(out)) and np.std(out) > 0


def test_rank1_sites():
    shapes = param_shapes(wide_resnet(depth=10, k=1, num_components=4), (1, 8, 8, 3))
    assert shapes["wide_resnet/group2_block1/conv1/alpha"] == (4, 16)
    assert shapes["wide_resnet/group2_block1/conv1/gamma"] == (4, 32)
    assert shapes["wide_resnet/logits/w"] == (64, 10)
    # batch norm is shared by the components (Haiku's broadcastable (1, 1, 1, C) shape)
    assert shapes["wide_resnet/final_bn/scale"] == (1, 1, 1, 64)
    plain = param_count(wide_resnet(depth=10, k=1), (1, 8, 8, 3))
    factors = sum(int(np.prod(v)) for k, v in shapes.items() if k.split("/")[-1] in ("alpha", "gamma"))
    # rank-1 adds the factors and turns the logits bias (10,) into one per component (4, 10)
    assert sum(int(np.prod(v)) for v in shapes.values()) == plain + factors + 3 * 10


def test_batch_norm_option_of_lenet():
    shapes = param_shapes(lenet5(channels=(2, 3), hidden=8, batch_norm=True), (1, 28, 28, 1))
    assert "lenet5/bn_dense1/scale" in shapes and "lenet5/conv1/b" not in shapes


@pytest.fixture(scope="module")
def plain_lstm():
    """The tiny LSTM run once on its tokens and a copy with one last token changed."""
    network_fn, tokens, _ = TINY["lstm"]
    changed = tokens.copy()
    changed[0, -1] = 7
    both = np.concatenate([tokens, changed])
    out, params, _, _ = run(network_fn, both)
    return both, out, params


def test_lstm_gates_last_token_and_float_tokens(plain_lstm):
    both, out, params = plain_lstm
    bias = params["lstm_classifier/lstm/kernel"]["b"]
    np.testing.assert_array_equal(bias, np.repeat([0.0, 1.0, 0.0, 0.0], 5))  # forget gate = 1
    # the classifier reads the final hidden state, so the last token changes the output
    assert not np.allclose(out[0], out[2]) and np.allclose(out[1], out[3])
    out_float, _ = jax.jit(hk.transform_with_state(TINY["lstm"][0]).apply)(
        params, {}, None, both.astype(np.float32))
    np.testing.assert_allclose(out_float, out, rtol=1e-6)


def test_rank1_lstm_with_unit_factors_is_the_plain_lstm(plain_lstm):
    k, (tokens, out_plain, params) = 3, plain_lstm
    rank1 = hk.transform_with_state(TINY["rank1_lstm"][0])
    r1 = jax.tree_util.tree_map(np.asarray, jax.jit(rank1.init)(KEY, tokens)[0])
    assert r1["lstm_classifier/lstm/kernel"]["alpha"].shape == (k, 4)
    for module, leaves in r1.items():
        for name in leaves:
            if name in ("alpha", "gamma"):
                leaves[name] = np.ones_like(leaves[name])
            elif name == "b":  # per-component bias: copy the plain bias to every component
                leaves[name] = np.tile(params[module]["b"], (k, 1))
            else:
                leaves[name] = params[module][name]
    out_rank1, _ = jax.jit(rank1.apply)(r1, {}, None, tokens)
    np.testing.assert_allclose(out_rank1, np.tile(out_plain, (k, 1)), rtol=1e-5, atol=1e-6)


def test_on_flat_images_reshapes_rows():
    seen = []

    def network_fn(x, is_training=False):
        seen.append(is_training)
        return x

    flat = np.arange(2 * 64, dtype=np.float32).reshape(2, 64)
    wrapped = on_flat_images(network_fn, (8, 8, 1))
    np.testing.assert_array_equal(wrapped(flat, True), flat.reshape(2, 8, 8, 1))
    images = flat.reshape(2, 8, 8, 1)
    assert wrapped(images) is images and seen == [True, False]


def test_bad_inputs_raise_named_errors():
    with pytest.raises(ValueError, match="argument x"):
        abstract_output(TINY["lenet5"][0], np.ones((2, 64), np.float32), False)
    with pytest.raises(ValueError, match="tokens"):
        abstract_output(TINY["lstm"][0], np.ones((2, 4, 1), np.int32), False)
    with pytest.raises(ValueError, match="6n \\+ 4"):
        abstract_output(wide_resnet(depth=27), np.ones((1, 8, 8, 3), np.float32), False)


@pytest.mark.parametrize("count_biases", [True, False])
@pytest.mark.parametrize("depth", range(1, 9))
def test_widest_mlp_under_budget_is_maximal(depth, count_biases):
    w = widest_mlp_under_budget(depth, budget=1000, count_biases=count_biases)
    assert mlp_param_count(depth, w, count_biases=count_biases) < 1000
    assert mlp_param_count(depth, w + 1, count_biases=count_biases) >= 1000


def test_budget_mlp_values_and_formula():
    assert [widest_mlp_under_budget(d) for d in (1, 2, 3, 4)] == [199, 28, 20, 16]
    assert [widest_mlp_under_budget(d, count_biases=False) for d in (1, 2, 3)] == [249, 29, 21]
    # the formula equals the Haiku MLP's own count
    assert param_count(mlp((28, 28), 2), (1, 2)) == mlp_param_count(2, 28) == 954
    with pytest.raises(ValueError, match="budget"):
        widest_mlp_under_budget(3, budget=8)
