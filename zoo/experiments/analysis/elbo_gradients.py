"""Minibatch gradients of the negative ELBO at a fitted SVI posterior's parameters, one per minibatch: what
the optimiser of `inference.fit` would see there (for gradient signal-to-noise ratios, `zoo.experiments.analysis.gradient_snr`).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from inference.data_args import check_model_data
from inference.svi import constrain as constrain_params
from inference.guide_params import param_constraints
from inference.estimators import as_estimator
from inference.posterior import SVIPosterior
from base.validation import check_positive_ints, check_seed
from base.value_key import Static
from base.errors import InputError
from base.prng import flat_key

__all__ = ["elbo_gradients"]


def elbo_gradients(posterior, data, *, batch_size: int = 128, num_batches: int = 10, seed: int = 0,
                   names=None, estimator="standard", same_batch: bool = False) -> dict:
    """Gradients of the one-particle negative ELBO (beta 1, temperature 1, the loss of `inference.fit`) with
    respect to the UNCONSTRAINED guide parameters of an SVI `posterior`, at those parameters, on
    `num_batches` minibatches of `data` ((x, y) or a `zoo.data.Dataset`, N examples; the likelihood is
    scaled by N / batch_size as in `fit`).

    Minibatch t is `batch_size` distinct rows drawn at random (each minibatch independently; NumPy seed
    `seed`; batch_size <= N) with noise key ``fold_in(PRNGKey(seed), t)``; the parameters are the same for
    every minibatch (unlike a training window, where they move between steps).
    names: the parameter names to return (default all). Not for models with mutable (batch-norm) state.
    estimator: as `inference.fit` ("standard": one guide draw per minibatch; "per_example": one per
    example; "local": the local reparameterisation trick). same_batch: every gradient on minibatch 0, with
    its own noise key, so that the spread is the estimator's noise alone (e.g. to compare estimators'
    gradient variances on one batch).
    Returns:
      {name: (num_batches, *param shape)} float32 gradients.
    """
    if not isinstance(posterior, SVIPosterior):
        raise InputError("posterior", f"<{type(posterior).__name__}>", "an inference.SVIPosterior")
    check_positive_ints(batch_size=batch_size, num_batches=num_batches)
    check_seed(seed)
    estimator = as_estimator(estimator)
    x, y = (data.x, data.y) if hasattr(data, "x") else data
    x, y = check_model_data(posterior.model, x, y, arg="data", feature_shape=posterior.feature_shape)
    n = x.shape[0]
    if batch_size > n:
        raise InputError("batch_size", batch_size, f"at most N = {n} (the examples in data)")
    params_u = posterior.unconstrained_params()
    names = list(params_u) if names is None else list(names)
    unknown = [k for k in names if k not in params_u]
    if unknown:
        raise InputError("names", unknown, f"names of the guide's parameters ({sorted(params_u)})")
    model, guide = posterior.model, posterior.guide
    fn = functools.partial(_gradients, Static(model), Static(guide), estimator, n)
    rng = np.random.default_rng(seed)
    perm = np.stack([rng.permutation(n)[:batch_size] for _ in range(1 if same_batch else num_batches)])
    perm = np.broadcast_to(perm, (num_batches, batch_size))
    keys = jax.vmap(lambda t: jax.random.fold_in(jax.random.PRNGKey(seed), t))(jnp.arange(num_batches))
    grads = fn({k: jnp.asarray(v) for k, v in params_u.items()}, keys, jnp.asarray(x[perm]), jnp.asarray(y[perm]))
    return {k: np.asarray(grads[k]) for k in names}


@functools.partial(jax.jit, static_argnums=(0, 1, 2, 3))
def _gradients(model: Static, guide: Static, estimator, n: int, params_u, keys, xb, yb):
    """{name: (num_batches, *shape)} gradients of the one-particle negative ELBO (`estimator`'s, an
    `inference.estimators` object; KL weight 1) at the unconstrained guide parameters `params_u`, one per key
    (num_batches, 2) and minibatch xb (num_batches, B, ...), yb (num_batches, B); n: the training-set size N.
    Compiled once per (model, guide) value keys, estimator, N and the arrays' shapes."""
    elbo_loss = estimator.loss
    constraints = param_constraints(guide.obj, (xb[0], yb[0]), n)

    def loss(p_u, key, x1, y1):
        return elbo_loss(flat_key(key), constrain_params(constraints, p_u), model.obj, guide.obj, 1.0, 1, x1, y1,
                         n)[0]

    return jax.vmap(jax.grad(loss), in_axes=(None, 0, 0, 0))(params_u, keys, xb, yb)
