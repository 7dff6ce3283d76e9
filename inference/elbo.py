"""The ELBO with an exact KL weight (linear warm-up) and a likelihood temperature for any guide.

    loss(params) = -( E_q[log p(y | x, w)] * N/B / T  -  beta * KL(q || p) )

T (`temperature`, 1 by default) tempers the likelihood: at beta = 1 the loss is the negative ELBO of the
tempered posterior p_T(w | D) proportional to p(D | w)^(1/T) p(w), whose optimum is the one of a KL weight
lambda = T on the ordinary ELBO, E_q[log p(D | w)] - lambda * KL (the loss divided by T).

The KL is computed site by site in closed form where NumPyro registers one between the guide's and the
model's distribution (Normal-Normal, Delta-anything, ...) and by a one-sample Monte Carlo estimate
log q(w) - log p(w) otherwise (Cauchy, log-uniform, transformed sites, auxiliary latents). For the
dense-covariance Gaussians (full, low-rank, block-diagonal guides) log q(w) is replaced by its exact
expectation -H(q) (`EXACT_ENTROPY`), and -log p(w) of every site under a Normal prior by its exact
expectation from the guide's `site_moments` (``inference.gaussian_kl``): their KL is then exact.
beta and T enter as arguments of the jitted step, so annealing or another temperature never recompiles.
A scale handler around the prior does not weight the KL under NumPyro's TraceMeanField_ELBO, which is why
beta is applied here, to the KL term itself.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from numpyro import handlers
from numpyro.distributions.kl import kl_divergence

from inference.gaussian_kl import EXACT_ENTROPY, expected_normal_cross_entropy, normal_prior_parameters
from inference.guide_protocol import HasSiteMoments


def elbo_terms(rng_key, params, model, guide, *args, mutable=None, **kwargs):
    """One-particle estimate of (expected log-likelihood, KL) for constrained guide `params`.

    mutable: {site: value} of the model's ``numpyro.mutable`` sites (e.g. batch-norm state) to run with.
    Returns:
      (log_lik, kl, new_mutable): scalars (log_lik is already scaled to the full data set by the model's
      scale handler) and the mutable sites' values after the model ran.
    """
    guide_key, model_key = jax.random.split(rng_key)
    seeded_guide = handlers.seed(handlers.substitute(guide, data=params), guide_key)
    guide_trace = handlers.trace(seeded_guide).get_trace(*args, **kwargs)
    seeded_model = handlers.seed(handlers.substitute(model, data={**params, **(mutable or {})}), model_key)
    model_trace = handlers.trace(handlers.replay(seeded_model, guide_trace)).get_trace(*args, **kwargs)

    log_lik = 0.0
    kl = 0.0
    covered = set()
    moments = guide.site_moments(params) if isinstance(guide, HasSiteMoments) else {}
    for name, site in model_trace.items():
        if site["type"] != "sample":
            continue
        scale = 1.0 if site["scale"] is None else site["scale"]
        if site["is_observed"]:
            log_lik = log_lik + scale * jnp.sum(site["fn"].log_prob(site["value"]))
            continue
        guide_site = guide_trace.get(name)
        prior_normal = normal_prior_parameters(site["fn"]) if name in moments else None
        if prior_normal is not None:  # a Delta slice of a dense Gaussian: exact E_q[-log p(w)]
            kl = kl + scale * jnp.sum(expected_normal_cross_entropy(*moments[name], *prior_normal))
            covered.add(name)
            continue
        analytic = None
        if guide_site is not None and not guide_site["infer"].get("is_auxiliary"):
            try:
                analytic = kl_divergence(guide_site["fn"], site["fn"])
            except NotImplementedError:
                analytic = None
            if analytic is not None and jnp.shape(analytic) != tuple(guide_site["fn"].batch_shape):
                analytic = None
        if analytic is not None:
            kl = kl + scale * jnp.sum(analytic)
            covered.add(name)
        else:
            kl = kl - scale * jnp.sum(site["fn"].log_prob(site["value"]))
    for name, site in guide_trace.items():
        if site["type"] == "sample" and name not in covered and not site["is_observed"]:
            scale = 1.0 if site["scale"] is None else site["scale"]
            fn = site["fn"]
            log_q = -fn.entropy() if isinstance(fn, EXACT_ENTROPY) else fn.log_prob(site["value"])
            kl = kl + scale * jnp.sum(log_q)
    new_mutable = {name: site["value"] for name, site in model_trace.items() if site["type"] == "mutable"}
    return log_lik, kl, new_mutable


def annealed_elbo_loss(rng_key, params, model, guide, beta, num_particles, *args, temperature=1.0, mutable=None,
                       **kwargs):
    """(-(log_lik / temperature - beta * KL) averaged over `num_particles` independent draws (vmapped), new
    mutable state): the module docstring's loss; beta and temperature are scalars (traced or not).

    The new mutable state (batch-norm statistics) is the first particle's, with its gradient stopped.
    """
    def one(key):
        log_lik, kl, new_mutable = elbo_terms(key, params, model, guide, *args, mutable=mutable, **kwargs)
        return -(log_lik / temperature - beta * kl), new_mutable

    if num_particles == 1:
        loss, new_mutable = one(rng_key)
    else:
        losses, mutables = jax.vmap(one)(jax.random.split(rng_key, num_particles))
        loss, new_mutable = jnp.mean(losses), jax.tree.map(lambda v: v[0], mutables)
    return loss, jax.lax.stop_gradient(new_mutable)
