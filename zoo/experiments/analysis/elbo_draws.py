"""The negative ELBO per example of an SVI posterior on a data set, one value per Monte Carlo draw (k-tied
Normal paper, Table 2, Fig. 6 left and Fig. 7: "-ELBO", reported as mean and SEM over 100 weight samples).

For a draw w_s ~ q and a data set D' of N' examples (test or validation), with N the training-set size:

    -ELBO_s / example = -(1/N') sum_{(x, y) in D'} log p(y | x, w_s) + KL(q || p) / N

i.e. the expected log-likelihood per example of D' (one draw) and the KL spread over the N training
examples, as the training objective weights it. The KL is `inference.elbo.elbo_terms`' (closed form where
NumPyro registers one, so the same for every draw; a one-draw estimate otherwise).
"""

from __future__ import annotations

import functools

import jax
import numpy as np

from inference.data_args import check_model_data
from inference.elbo import elbo_terms
from base.validation import check_positive_ints, check_seed
from base.value_key import Static
from base.errors import InputError
from base.prng import flat_key

__all__ = ["negative_elbo_draws"]


def negative_elbo_draws(posterior, x, y, n_train: int, num_samples: int = 100, seed: int = 0,
                        chunk_size: int = 10) -> np.ndarray:
    """(num_samples,) values of -ELBO per example (module docstring) of an SVI `posterior` on x (N', ...), y (N',).

    n_train: the training-set size N the KL is divided by; draws are made `chunk_size` at a time (memory:
    the network on all N' examples for `chunk_size` draws). Draw s uses ``fold_in(PRNGKey(seed), s)``.
    Not for models with mutable state (batch norm): their statistics are not passed.
    """
    if getattr(posterior, "kind", None) != "svi":
        raise InputError("posterior", f"<a {getattr(posterior, 'kind', '?')!r} posterior>",
                         "an SVI Posterior (the ELBO needs the guide)")
    check_positive_ints(n_train=n_train, num_samples=num_samples, chunk_size=chunk_size)
    check_seed(seed)
    x, y = check_model_data(posterior.model, x, y, arg="x", feature_shape=posterior.feature_shape)
    n_eval = int(x.shape[0])
    model, guide = posterior.model, posterior.guide

    fn = functools.partial(_terms_per_draw, Static(model), Static(guide), int(chunk_size))
    keys = jax.vmap(lambda s: jax.random.fold_in(jax.random.PRNGKey(seed), s))(np.arange(num_samples))
    log_lik, kl = fn(keys, posterior.params, jax.device_put(x), jax.device_put(y))
    return -np.asarray(log_lik, np.float64) / n_eval + np.asarray(kl, np.float64) / n_train


@functools.partial(jax.jit, static_argnums=(0, 1, 2))
def _terms_per_draw(model: Static, guide: Static, chunk_size: int, keys, params, xs, ys):
    """((S,), (S,)): the log-likelihood of xs (N', ...), ys (N',) and the KL, one per key (S, 2), `chunk_size`
    draws at a time (`lax.map`). Compiled once per (model, guide) value keys, chunk size and array shapes."""
    def one(key):
        log_lik, kl, _ = elbo_terms(flat_key(key), params, model.obj, guide.obj, xs, ys, xs.shape[0])
        return log_lik, kl

    return jax.lax.map(one, keys, batch_size=chunk_size)
