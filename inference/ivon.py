"""IVON: natural-gradient variational learning of the mean-field Gaussian at Adam's cost (Shen et al. 2024,
"Variational Learning is Effective for Large Deep Networks", Algorithm 1).

State: the mean m, a diagonal Hessian estimate h and a gradient momentum g (each weight-shaped). One step:

    sigma = 1 / sqrt(lambda (h + delta))              theta = m + sigma * eps,  eps ~ N(0, I)
    g_hat = grad of the minibatch's mean loss at theta  h_hat = g_hat * eps / sigma   (reparameterisation trick)
    g = beta1 g + (1 - beta1) g_hat
    h = beta2 h + (1 - beta2) h_hat + (1/2) (1 - beta2)^2 (h - h_hat)^2 / (h + delta)     (keeps h > 0)
    m = m - a_t (g / (1 - beta1^t) + delta m) / (h + delta)

The posterior is q = N(m, sigma^2) elementwise: the mean-field family, so IVON runs under `inference.fit` with
``guide=inference.mean_field(model)`` and returns the same `SVIPosterior` an Adam fit returns (loc = m, the
guide's free scale = sigma), which predicts, scores, starts NUTS, saves and resumes unchanged.

Why an algorithm of its own rather than an optax transformation of the ELBO's gradients: IVON needs the
gradient of the *data* loss at the draw theta and the draw's noise eps (for h_hat), and it sets sigma from h
instead of descending a gradient for it. An optax transformation sees only the ELBO's gradients with respect to
loc and scale, from which the data gradient could be recovered only by knowing the prior, the entropy term and
the guide's parametrisation. So `ivon` returns an `IVON` object that is both an optax-style record over plain
pytrees of means (``init(params)``, ``update(grads, state, params)`` with the draw's eps / sigma carried in the
state, `sigma`; what `inference.fit` probes and fingerprints for resume) and an SVI algorithm for the zoo's
mean-field guide (``build_svi``, the `inference.svi.build` pair ``init`` / ``step``; `inference.svi.build`
hands over to it when the optimiser has one).

Weight decay from the prior (derivation). IVON minimises lambda E_q[l(theta) + delta |theta|^2 / 2] - H(q) with
l the mean per-example loss. The Bayesian ELBO with a Normal(0, s) prior per weight is
-E_q[sum_i log p(y_i | x_i, theta)] + E_q[|theta|^2] / (2 s^2) - H(q) + const
= N E_q[l(theta) + |theta|^2 / (2 s^2 N)] - H(q) + const, so lambda = N (the training-set size) and
delta = 1 / (s^2 N) per weight. With another ``ess`` lambda the data and the prior are both scaled by lambda / N
(a tempered posterior); delta stays 1 / (s^2 N). `inference.fit`'s likelihood temperature T and KL weight beta
enter as the ELBO -E_q[log p(D | theta)] / T + beta KL(q || p), which divided by beta is the ELBO of the
likelihood p(D | theta)^(1 / (T beta)): the data loss is scaled by 1 / (T beta) (beta = 0 gives a non-finite
step, which stops the fit).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from numpyro import handlers
from numpyro.distributions import biject_to

from base import validation
from base.errors import InputError
from base.prng import flat_key
from base.value_key import value_key
from inference.estimators import as_estimator
from inference import svi
from inference.gaussian_kl import normal_prior_parameters
from inference.guide_params import param_constraints
from inference.mean_field import NormalFamily

__all__ = ["IVON", "IVONState", "ivon", "DEFAULT_LR"]


class IVONState(NamedTuple):
    """count: int32 scalar, updates done; momentum, hess: {name: array} g and h of every parameter (its shape);
    noise: {name: array} eps / sigma of the last draw (zeros before the first: `update` then moves h by its
    positivity term alone); weight_decay: {name: array} delta of every entry; ess: float32 scalar lambda."""

    count: Any
    momentum: Any
    hess: Any
    noise: Any
    weight_decay: Any
    ess: Any


@dataclass(frozen=True)
class IVON:
    """The IVON optimiser (see the module docstring); build it with `ivon`.

    learning_rate: a_t, a positive float or an optax schedule (step count -> rate); ess: lambda, or None (the
    training-set size N); hess_init: h_0 > 0; beta1 in [0, 1); beta2 in [0, 1]; weight_decay: delta >= 0, or
    None (from the model's Normal(0, s) prior: 1 / (s^2 N) per weight).
    """

    learning_rate: Any = 0.2
    ess: float | None = None
    hess_init: float = 1.0
    beta1: float = 0.9
    beta2: float = 0.99999
    weight_decay: float | None = None

    def __value_key__(self):
        """Its fields, the learning rate by `base.value_key` (a number by value, a schedule function by identity)."""
        return (value_key(self.learning_rate), self.ess, self.hess_init, self.beta1, self.beta2, self.weight_decay)

    def config(self) -> dict:
        """JSON-able {"kind": "ivon", field: value}: what identifies it when a fit resumes (a schedule function as
        its name: the state's structure is compared beside it)."""
        rate = self.learning_rate
        return {"kind": "ivon", "learning_rate": float(rate) if not callable(rate) else f"<{type(rate).__name__}>",
                "ess": self.ess, "hess_init": self.hess_init, "beta1": self.beta1, "beta2": self.beta2,
                "weight_decay": self.weight_decay}

    # ----- the optax-style record over a pytree of means -------------------------------------------------------
    def init(self, params, *, weight_decay=None, ess=None) -> IVONState:
        """The state for means `params` (a pytree): h = hess_init, g = 0, noise = 0, count 0. weight_decay: a
        pytree like `params` of delta (default: the object's ``weight_decay``, 0 when None); ess: lambda
        (default: the object's ``ess``, 1 when None)."""
        zeros = jax.tree.map(jnp.zeros_like, params)
        if weight_decay is None:
            weight_decay = jax.tree.map(lambda p: jnp.full_like(p, self.weight_decay or 0.0), params)
        lam = ess if ess is not None else (self.ess or 1.0)
        return IVONState(jnp.zeros((), jnp.int32), zeros, jax.tree.map(lambda p: jnp.full_like(p, self.hess_init),
                                                                       params),
                         zeros, weight_decay, jnp.asarray(lam, jnp.float32))

    def update(self, grads, state: IVONState, params=None):
        """(updates, new state): Algorithm 1's steps 3-4 for g_hat = `grads` (the gradient of the mean
        per-example loss at the draw) and h_hat = g_hat * ``state.noise`` (eps / sigma of that draw); updates
        = m_new - m for means `params` (required: the weight decay acts on them)."""
        if params is None:
            raise InputError("params", None, "the current means (IVON's weight decay acts on them)")
        count = state.count + 1
        rate = self.learning_rate(state.count) if callable(self.learning_rate) else self.learning_rate
        b1, b2 = self.beta1, self.beta2
        momentum = jax.tree.map(lambda g, gh: b1 * g + (1 - b1) * gh, state.momentum, grads)
        hess = jax.tree.map(
            lambda h, gh, n, d: b2 * h + (1 - b2) * gh * n + 0.5 * (1 - b2) ** 2 * (h - gh * n) ** 2 / (h + d),
            state.hess, grads, state.noise, state.weight_decay)
        debias = 1 - b1 ** count.astype(jnp.float32)
        updates = jax.tree.map(lambda g, h, d, m: -rate * (g / debias + d * m) / (h + d),
                               momentum, hess, state.weight_decay, params)
        return updates, state._replace(count=count, momentum=momentum, hess=hess)

    @staticmethod
    def sigma(state: IVONState):
        """{name: array} q's sd, 1 / sqrt(lambda (h + delta))."""
        return jax.tree.map(lambda h, d: jax.lax.rsqrt(state.ess * (h + d)), state.hess, state.weight_decay)

    # ----- the SVI algorithm for the zoo's mean-field guide -------------------------------------------------
    def build_svi(self, model, guide, *, n_data: int, num_particles: int = 1, estimator: str = "standard"):
        """The `inference.svi.SVI` pair (``init(key, batch, init_params=None)``, ``step(state, batch, key,
        beta=1.0, temperature=1.0)``) that runs IVON on `guide` (``inference.mean_field(model)``); the state is
        an `inference.svi.SVIState` whose params are the guide's unconstrained parameters and whose opt_state
        is an `IVONState` keyed by site. InputError for num_particles != 1 or another estimator than
        "standard" (IVON's own estimator is the single reparameterised draw)."""
        if num_particles != 1:
            raise InputError("num_particles", num_particles, "1 with inference.ivon (one draw per step)")
        if as_estimator(estimator).name != "standard":
            raise InputError("estimator", estimator, "'standard' with inference.ivon")
        fixed = dict(ivon=self, model=model, guide=guide, n_data=n_data)
        return svi.SVI(functools.partial(_init, **fixed), functools.partial(_step, **fixed))


DEFAULT_LR = 0.2
"""`ivon`'s learning rate: chosen on the validation split of real 28 x 28 digits (3,200 training images, MLP
784-400-400-10, 1,000 steps, h_0 = 1) among 0.05, 0.2 and 0.5 (validation NLL 0.147 (0.05, beta2 0.99999), 0.101,
0.108); with h_0 = 1 the first steps are SGD's at that rate."""


def ivon(learning_rate=DEFAULT_LR, *, steps: int | None = None, ess: float | None = None, hess_init: float = 1.0,
         beta1: float = 0.9, beta2: float | None = None, weight_decay: float | None = None) -> IVON:
    """IVON for ``inference.fit(model, inference.mean_field(model), data, steps=S, optimizer=inference.ivon(steps=S))``.

    learning_rate: a_t > 0, a float (default `DEFAULT_LR`) or an optax schedule; steps: the fit's number of steps
    S (a positive integer) or None: given, a float rate is cosine-decayed to 0 over S steps and beta2 defaults
    to 1 - 1/S (the Hessian average then spans the run: the paper's 0.99999 is for runs of 10^5 steps or more,
    over 1,000 steps h, and so sigma, barely leaves h_0); ess: lambda (default None: the training-set size N,
    the Bayesian posterior); hess_init: h_0 > 0 (the paper uses 0.01-1; the initial sd is
    1 / sqrt(lambda (h_0 + delta)); 0.1 diverged on the digits above); beta1: gradient momentum; beta2: the
    Hessian's momentum (default None: 1 - 1/steps with `steps`, else the paper's 0.99999); weight_decay: delta
    (default None: from the model's Normal prior, 1 / (s^2 N) per weight: the module docstring's derivation).
    InputError naming the argument for a bad value.
    """
    if steps is not None:
        validation.check_positive_ints(steps=steps)
    if not callable(learning_rate):
        learning_rate = validation.check_real("learning_rate", learning_rate, low=0.0)
        if steps is not None:
            learning_rate = optax.cosine_decay_schedule(learning_rate, float(steps))
    if beta2 is None:
        beta2 = 0.99999 if steps is None else 1.0 - 1.0 / steps
    if ess is not None:
        validation.check_real("ess", ess, low=0.0)
    validation.check_real("hess_init", hess_init, low=0.0)
    validation.check_real("beta1", beta1, low=0.0, high=1.0, low_open=False)
    validation.check_real("beta2", beta2, low=0.0, high=1.0, low_open=False, high_open=False)
    if weight_decay is not None:
        validation.check_real("weight_decay", weight_decay, low=0.0, low_open=False)
    return IVON(learning_rate, None if ess is None else float(ess), float(hess_init), float(beta1), float(beta2),
                None if weight_decay is None else float(weight_decay))


# ----- the SVI pair (module-level, bound by `IVON.build_svi`) ------------------------------------------------------
class _Sites(NamedTuple):
    """What a step needs of the guide: {site: (loc name, scale name, Site, family)} and {site: (prior loc,
    prior scale)} broadcast to the site's shape."""

    names: dict
    priors: dict


def _sites(guide) -> _Sites:
    """The guide's sites checked for IVON (InputError naming ``guide`` otherwise): a mean-field guide
    (`NormalFamily` on every site), real supports, Normal priors centred at 0."""
    assigned = guide.assigned() if hasattr(guide, "assigned") else None
    if assigned is None or not all(isinstance(f, NormalFamily) for f in assigned.values()):
        raise InputError("guide", f"<{type(guide).__name__} {getattr(guide, 'config', {}).get('name', '')}>",
                         "inference.mean_field(model) with inference.ivon (IVON's posterior is mean field)")
    names, priors = {}, {}
    for name, site in guide.sites.items():
        with jax.ensure_compile_time_eval():  # the prior's constants, concrete even while a step is traced
            prior = normal_prior_parameters(site.prior)
        if not site.is_real or prior is None or bool(np.any(np.asarray(prior[0]) != 0)):
            raise InputError("model", f"<site {name!r} with prior {type(site.prior).__name__}>",
                             "a Normal(0, s) prior on every site with inference.ivon (its weight decay is the prior)")
        names[name] = (guide.param_name(name, "loc"), guide.param_name(name, "scale"), site, assigned[name])
        priors[name] = prior
    return _Sites(names, priors)


def _init(key, batch, *, ivon: IVON, model, guide, n_data, init_params=None) -> svi.SVIState:
    """The SVIState at step 0: the guide's locations (or `init_params`' ones), h = hess_init, the guide's free
    scale set to IVON's sigma; delta per site from the prior (or ``ivon.weight_decay``), lambda = ``ivon.ess``
    or `n_data`."""
    x, _ = batch
    sites = _sites(guide)
    params_u = svi.initial_params(guide, key, batch, n_data)
    if init_params is not None:
        start = svi.check_init_params(init_params, {k: jax.ShapeDtypeStruct(jnp.shape(v), v.dtype)
                                                    for k, v in params_u.items()})
        params_u = {k: jnp.asarray(start[k], dtype=v.dtype) for k, v in params_u.items()}
    means = {s: params_u[loc] for s, (loc, _, _, _) in sites.names.items()}
    decay = {s: (jnp.full(jnp.shape(means[s]), ivon.weight_decay, jnp.float32) if ivon.weight_decay is not None
                 else (1.0 / (sites.priors[s][1] ** 2 * n_data)).astype(jnp.float32)) for s in means}
    state = ivon.init(means, weight_decay=decay, ess=float(n_data if ivon.ess is None else ivon.ess))
    params_u = _with_means(params_u, means, ivon.sigma(state), sites, param_constraints(guide, batch, n_data))
    return svi.SVIState(params_u, state, svi.initial_mutable(model, guide, key, batch, n_data), jnp.array(False))


def _with_means(params_u: dict, means: dict, sigma: dict, sites: _Sites, constraints: dict) -> dict:
    """The unconstrained guide parameters with loc = `means` and the free scale = `sigma` (site -> array)."""
    out = dict(params_u)
    for s, (loc, scale, _, _) in sites.names.items():
        out[loc] = means[s]
        out[scale] = biject_to(constraints[scale]).inv(sigma[s]).astype(params_u[scale].dtype)
    return out


def log_likelihood_at(model, theta: dict, mutable: dict, key, x, y, n_data):
    """(log p(y | x, theta) scaled to the data set (the model's N / B scale), the mutable sites after the run):
    the model run with its latent sites at `theta` {site: value}."""
    seeded = handlers.seed(handlers.substitute(model, data={**theta, **mutable}), key)
    trace = handlers.trace(seeded).get_trace(x, y, n_data)
    total: Any = 0.0
    for site in trace.values():
        if site["type"] == "sample" and site["is_observed"]:
            total = total + (1.0 if site["scale"] is None else site["scale"]) * jnp.sum(site["fn"].log_prob(site["value"]))
    return total, {k: s["value"] for k, s in trace.items() if s["type"] == "mutable"}


def _normal_kl(m, sd, prior) -> jnp.ndarray:
    """KL(N(m, sd^2) || N(prior loc, prior scale^2)) summed over the entries."""
    mu, s = prior
    return jnp.sum(jnp.log(s / sd) + (sd**2 + (m - mu) ** 2) / (2 * s**2) - 0.5)


def _normals(key, like: dict) -> dict:
    """{name: standard normals shaped like like[name]} (float32), all from ONE ``jax.random.normal`` draw under
    ``base.prng.flat_key(key)`` (one hash for every site; on an MLP of 478k weights a step of IVON then took
    7.6 ms on CPU, against 36 ms with `base.prng.paired_normals`, whose hash compiled to a loop)."""
    sizes = [int(np.prod(jnp.shape(v))) for v in like.values()]
    flat = jax.random.normal(flat_key(key), (sum(sizes),), jnp.float32)
    parts = jnp.split(flat, np.cumsum(sizes)[:-1])
    return {name: part.reshape(jnp.shape(v)) for (name, v), part in zip(like.items(), parts)}


def _step(state: svi.SVIState, batch, key, *, ivon: IVON, model, guide, n_data, beta=1.0,
          temperature=1.0) -> tuple[svi.SVIState, svi.StepInfo]:
    """One IVON step on batch = (x (B, ...), y (B,)) (the module docstring's update). The draw uses the guide's
    sd for IVON's sigma (the guide's sigma cap, `inference.mean_field`'s ``scale_cap``, applies to it as to an
    Adam fit; with ``scale_cap=None`` it is sigma itself), so that the posterior is what was trained.
    StepInfo.loss: -log p(y | x, theta) N/B / T + beta KL(q || p) at the state before the update (the ELBO
    loss `inference.svi.step` reports); grad_norm: the global norm of N (g_hat + delta m), the ELBO gradient
    with respect to the means per unit beta. A non-finite loss or gradient leaves the state and sets
    ``stopped``."""
    x, y = batch
    sites = _sites(guide)
    constraints = param_constraints(guide, batch, n_data)
    means = {s: state.params[loc] for s, (loc, _, _, _) in sites.names.items()}  # a location is unconstrained
    opt_state: IVONState = state.opt_state  # type: ignore[assignment]  # build_svi's state holds an IVONState
    sigma = ivon.sigma(opt_state)  # = the guide's free scale, without a softplus of it
    sds = {s: family.sd(site, sigma[s]) for s, (_, _, site, family) in sites.names.items()}
    draw_key, model_key = jax.random.split(key)
    eps = _normals(draw_key, means)
    theta = {s: means[s] + sds[s] * eps[s] for s in means}
    scale = 1.0 / (n_data * temperature * beta)

    def data_loss(theta):
        log_lik, mutable = log_likelihood_at(model, theta, state.mutable, model_key, x, y, n_data)
        return -log_lik * scale, (log_lik, mutable)

    (_, (log_lik, mutable)), g_hat = jax.value_and_grad(data_loss, has_aux=True)(theta)
    opt_state = opt_state._replace(noise={s: eps[s] / sds[s] for s in means})
    kl = sum(_normal_kl(means[s], sds[s], sites.priors[s]) for s in means)
    loss = -log_lik / temperature + beta * kl
    grad_norm = n_data * optax.tree.norm(jax.tree.map(lambda g, d, m: g + d * m, g_hat, opt_state.weight_decay, means))
    finite = jnp.isfinite(loss) & jnp.isfinite(grad_norm)

    updates, new_opt = ivon.update(g_hat, opt_state, means)
    params_u = _with_means(state.params, optax.apply_updates(means, updates), ivon.sigma(new_opt), sites, constraints)
    # an elementwise select rather than ``lax.cond``: XLA fuses it into the update (a conditional over the state
    # cost more than the rest of the step on CPU); the non-finite values it drops are never read
    new_state = jax.tree.map(lambda new, old: jnp.where(finite, new, old),
                             svi.SVIState(params_u, new_opt, mutable, state.stopped), state)
    new_state = new_state._replace(stopped=state.stopped | ~finite)
    return new_state, svi.StepInfo(jnp.asarray(loss, jnp.float32), grad_norm.astype(jnp.float32), finite)

