"""The k-tied paper's IMDB LSTM classifier (Keras `imdb_lstm` example without dropout), and its
rank-1 version (rank-1 paper section 4: LSTM and dense layers rank-1, embedding kept).

tokens (N, T) -> embedding 128 -> LSTM 128 (last hidden state) -> dense 1 (logit).
Defaults follow the Keras example: vocabulary 20,000, sequences of 80 tokens (pre-padded with 0,
no masking), forget-gate bias initialised to 1, gate order i, f, c, o.

The LSTM cell keeps the paper's two weight matrices apart (Keras/Edward2 `kernel` (E, 4H) and
`recurrent_kernel` (H, 4H), both k-tied in the paper) as two dense modules: `hk.Linear`
(Keras' glorot-uniform initialisation), or `models.rank1.Rank1Dense` in the rank-1 version.
Parameter count with the defaults: embedding 2,560,000 + kernel 65,536 + recurrent 65,536 +
bias 512 + dense 129 = 2,691,713. Check against k-tied Table 1 (mean field 2,823k: Bayesian kernels
and dense layer, point-estimated embedding and LSTM bias: 2,560,000 + 2 * 131,072 + 512 + 2 * 129
= 2,822,914).

Sites: `lstm_classifier/embedding/embeddings` (V, E), `lstm_classifier/lstm/kernel/{w,b}`,
`lstm_classifier/lstm/recurrent_kernel/w`, `lstm_classifier/dense/{w,b}`; the rank-1 version adds
`alpha` (K, fan-in) and `gamma` (K, fan-out) to each of kernel, recurrent_kernel and dense, and its
biases `b` are per component (K, fan-out), zero-initialised.
"""

from __future__ import annotations

import haiku as hk
import jax
import jax.numpy as jnp

from models.networks.layers import PLAIN, Layers
from base.errors import InputError

# Keras LSTM kernel initialiser (glorot uniform); rank-1 layers use their own.
GLOROT = hk.initializers.VarianceScaling(1.0, "fan_avg", "uniform")


def _forget_bias_one(hidden: int):
    """Bias initialiser (4H,) with ones on the forget-gate slice [H, 2H) (Keras unit_forget_bias)."""

    def init(shape, dtype):
        return jnp.zeros(shape, dtype).at[hidden:2 * hidden].set(1.0)

    return init


class LSTM(hk.RNNCore):
    """LSTM cell: inputs (N, E), state (h, c) each (N, H) -> output h (N, H), new state."""

    def __init__(self, hidden: int, layers: Layers = PLAIN, name: str = "lstm"):
        super().__init__(name=name)
        self.hidden = hidden
        self.layers = layers

    def __call__(self, inputs: jax.Array, state: tuple[jax.Array, jax.Array]):
        """One time step; gates = x W + h U + b split as input, forget, cell, output."""
        h, c = state
        four_h = 4 * self.hidden
        gates = (self.layers.dense(four_h, name="kernel", w_init=GLOROT,
                                   b_init=_forget_bias_one(self.hidden))(inputs)
                 + self.layers.dense(four_h, name="recurrent_kernel", with_bias=False,
                                     w_init=GLOROT)(h))
        i, f, g, o = jnp.split(gates, 4, axis=-1)
        c = jax.nn.sigmoid(f) * c + jax.nn.sigmoid(i) * jnp.tanh(g)
        h = jax.nn.sigmoid(o) * jnp.tanh(c)
        return h, (h, c)

    def initial_state(self, batch_size: int | None):
        """Zero state: (h, c), each (batch_size, H)."""
        zeros = jnp.zeros((batch_size, self.hidden), jnp.float32)
        return zeros, zeros


class LSTMClassifier(hk.Module):
    """Embedding -> LSTM -> dense on the last hidden state; see the module docstring.

    With `num_components` K set, the embedded batch is tiled K times (component-major) and the LSTM
    and output layers are rank-1: outputs have K n rows.
    """

    def __init__(self, vocab_size: int = 20_000, embed_dim: int = 128, hidden: int = 128,
                 num_outputs: int = 1, num_components: int | None = None, sign_init: float = 0.5,
                 name: str = "lstm_classifier"):
        super().__init__(name=name)
        self.vocab_size = vocab_size
        self.embed_dim = embed_dim
        self.hidden = hidden
        self.num_outputs = num_outputs
        self.layers = Layers(num_components, sign_init)

    def __call__(self, tokens: jax.Array, is_training: bool = False) -> jax.Array:
        """tokens (N, T) ids in [0, vocab_size) -> logits (N, num_outputs) ((K N, ...) if rank-1).

        Integer or float arrays of integral ids are accepted (`zoo.data.Dataset` stores inputs as
        float32, which holds ids below 2**24 exactly); they are cast to int32.
        """
        del is_training  # no batch norm or dropout
        if tokens.ndim != 2:
            raise InputError.worded("lstm_classifier", "lstm_classifier: argument tokens must have shape (N, T); "
                             f"got shape {tuple(tokens.shape)}")
        x = hk.Embed(self.vocab_size, self.embed_dim, name="embedding")(tokens.astype(jnp.int32))
        x = self.layers.tile(x)
        cell = LSTM(self.hidden, self.layers)
        outputs, _ = hk.dynamic_unroll(cell, jnp.swapaxes(x, 0, 1), cell.initial_state(x.shape[0]))
        return self.layers.dense(self.num_outputs, name="dense", w_init=GLOROT)(outputs[-1])


def lstm_classifier(vocab_size: int = 20_000, embed_dim: int = 128, hidden: int = 128,
                    num_outputs: int = 1, num_components: int | None = None,
                    sign_init: float = 0.5):
    """IMDB LSTM. Returns `network_fn(tokens, is_training=False) -> logits (N, num_outputs)`.

    tokens: (N, T) token ids in [0, vocab_size) (int32, or float32 holding integers).
    num_outputs=1 gives one Bernoulli logit per review (the paper); 2 gives categorical logits.
    num_components=K: the rank-1 LSTM (embedding not rank-1), logits (K N, num_outputs) tiled
    component-major (`models.rank1.tile_components`; use with `models.rank1.rank1_likelihood`).
    """

    def network_fn(tokens: jax.Array, is_training: bool = False) -> jax.Array:
        return LSTMClassifier(vocab_size, embed_dim, hidden, num_outputs, num_components,
                              sign_init)(tokens, is_training)

    return network_fn
