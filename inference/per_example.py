"""Per-example weight draws: the same ELBO as `inference.elbo`, its likelihood term estimated with an
independent guide draw for every example of the minibatch.

    loss = -( (N/B) sum_n log p(y_n | x_n, w_n) / T  -  beta * KL(q || p) ),   w_n ~ q independently

is an unbiased estimate of the loss of `inference.elbo.annealed_elbo_loss` (one draw w for the whole
minibatch): both have the expectation -(E_q[log p(D | w)] / T - beta KL). With one draw per minibatch the
B terms share w and their noise adds up coherently (the variance of the sum grows like B^2); with a draw
per example the terms are independent (it grows like B). For a dense layer with a factorised Gaussian
guide this is the estimator of the local reparameterisation trick (Kingma et al., 2015; variance networks,
eq. 8 and appendix A: "epsilon is sampled independently for each object in a mini-batch"), which samples
the pre-activations b_j ~ N(sum_i mu_ij a_i, sum_i sigma_ij^2 a_i^2) of that same marginal; here the weights
themselves are drawn, so it is exact for any guide. Cost: the guide is vmapped over the examples, so
every stochastic weight is drawn B times per step (B x its size of memory); point-estimate (Delta) sites
do not depend on the key and are not copied.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from inference.elbo import elbo_terms
from base.errors import InputError


def per_example_elbo_loss(rng_key, params, model, guide, beta, num_particles, x, y, n_data, *, temperature=1.0,
                          mutable=None):
    """(loss, new mutable state) with an independent guide draw per example (the module docstring).

    Same signature and same expectation as `inference.elbo.annealed_elbo_loss`: x (B, ...), y (B,) a
    minibatch, n_data the data set's size N (the model scales one example's log-likelihood by N, so the mean
    over the B examples is the (N/B) sum of the formula); beta, temperature scalars; ``num_particles``
    independent sets of B draws are averaged. The KL is averaged over the examples' traces (exact where it
    is analytic, lower-variance where it is a Monte Carlo estimate). Models with mutable state (batch norm)
    are refused: a one-example batch has no batch statistics. Returns (scalar loss, {}).
    """
    if mutable:
        raise InputError("estimator", "per_example", "a model without mutable state (batch norm)",
                         hint="batch statistics of a one-example batch do not exist; use estimator='standard'")

    def one_example(key, xn, yn):
        log_lik, kl, _ = elbo_terms(key, params, model, guide, xn[None], yn[None], n_data)
        return log_lik, kl

    def one_particle(key):
        log_lik, kl = jax.vmap(one_example)(jax.random.split(key, jnp.shape(x)[0]), x, y)
        return -(jnp.mean(log_lik) / temperature - beta * jnp.mean(kl))

    if num_particles == 1:
        return one_particle(rng_key), {}
    return jnp.mean(jax.vmap(one_particle)(jax.random.split(rng_key, num_particles))), {}
