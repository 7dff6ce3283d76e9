"""The ELBO with the local reparameterisation trick (Kingma et al., 2015) on a guide's dense layers.

    loss = -( E[log p(y | x, h)] * N/B / T  -  beta * KL(q || p) )

estimated like `inference.elbo.annealed_elbo_loss`, except that the likelihood of every dense weight site
whose family is a factorised Gaussian (mean field, k-tied N(mu, (U Vᵀ)²), variance layers N(mu, alpha mu²),
zero-mean N(0, sigma²)) or binary dropout is computed from pre-activations drawn per example and unit (`models.local_reparam`): the
exact marginal of `inference.per_example`'s independent weight draw per example, so both estimate the same
expected log-likelihood, at the cost of two matrix products instead of B weight draws and a vmap over the
examples. Convolution kernels of those Gaussian families use Flipout (Wen et al., 2018): example n's kernel
M + dW o (s_n r_nᵀ) with random signs, marginally a weight draw (so again the same expectation), the examples'
noise decorrelated, for a second convolution. Other stochastic sites (other families, dropout on a kernel) keep
one draw per minibatch, which is also unbiased. The KL term is the one of `annealed_elbo_loss` (closed form where NumPyro has one; the guide's
own draw otherwise). Batch norm works (the minibatch is one batch).
"""

from __future__ import annotations

from inference.dropout import BinaryDropoutFamily
from inference.elbo import annealed_elbo_loss
from inference.k_tied import KTiedFamily
from inference.mean_field import NormalFamily
from inference.zero_mean import VarianceLayerFamily, ZeroMeanFamily
from base.errors import InputError
from models.local_reparam import DropoutRule, FlipoutRule, GaussianRule, KTiedRule, local_noise

__all__ = ["GAUSSIAN_FAMILIES", "local_rules", "local_reparam_elbo_loss"]

GAUSSIAN_FAMILIES = (NormalFamily, KTiedFamily, VarianceLayerFamily, ZeroMeanFamily)
"""Families whose weights are independent Gaussians with closed-form moments (mean, variance)."""
LOCAL_FAMILIES = GAUSSIAN_FAMILIES + (BinaryDropoutFamily,)


def local_rules(guide, params: dict) -> dict:
    """{module path: rule} for the real weight sites (leaf ``w``) of a `SiteGuide`: a dense (2-D) site whose
    family is in `GAUSSIAN_FAMILIES` gets `GaussianRule` from the family's moments (`KTiedRule` for k-tied sites
    without a scale cap, whose sd is U Vᵀ exactly), or `DropoutRule` under binary dropout; a convolution kernel
    (3-D or more, channels last) of a `GAUSSIAN_FAMILIES` family gets `FlipoutRule`; all from the constrained
    guide ``params``. The module path of site ``a/~/b/w`` is ``a/b`` (`models.local_reparam.local_noise`)."""
    rules: dict[str, FlipoutRule | DropoutRule | KTiedRule | GaussianRule] = {}
    for name, site in guide.sites.items():
        family = guide.assignment[name]
        dense = len(site.shape) == 2 and isinstance(family, LOCAL_FAMILIES)
        kernel = len(site.shape) >= 3 and isinstance(family, GAUSSIAN_FAMILIES)
        if not site.is_real or not (dense or kernel):
            continue
        path, _, leaf = name.replace("/~/", "/").rpartition("/")
        if leaf != "w":
            continue
        values = {s: params[guide.param_name(name, s)] for s in family.params(site)}
        if kernel:
            rules[path] = FlipoutRule(*family.moments(site, values))
        elif isinstance(family, BinaryDropoutFamily):
            rules[path] = DropoutRule(values["loc"], family.rate)
        elif isinstance(family, KTiedFamily) and family.scale_cap is None:  # sd = U Vᵀ exactly: no (in, out) variance
            rules[path] = KTiedRule(values["loc"], values["u"], values["v"])
        else:
            rules[path] = GaussianRule(*family.moments(site, values))
    return rules


def local_reparam_elbo_loss(rng_key, params, model, guide, beta, num_particles, x, y, n_data, *, temperature=1.0,
                            mutable=None):
    """(loss, new mutable state): the module docstring's estimator, same signature and expectation as
    `inference.elbo.annealed_elbo_loss`; x (B, ...), y (B,) a minibatch, n_data the data set's size N; beta,
    temperature scalars; ``num_particles`` independent estimates averaged (each its own noise). Refuses a model of
    a Flax NNX or Equinox network (InputError: only Haiku's modules are intercepted), a guide
    with no dense Gaussian or dropout site and no Gaussian convolution kernel (InputError: nothing to
    reparameterise) and a rule whose module the network never calls as an ``hk.Linear`` (dense rules) or
    ``hk.ConvND`` (`FlipoutRule`) (InputError naming it)."""
    library = getattr(getattr(model, "adapter", None), "library", "haiku")
    if library != "haiku":
        raise InputError("estimator", "local", "a model of a Haiku network (the estimator computes the outputs of "
                         "Haiku's hk.Linear and hk.ConvND modules)",
                         hint=f"this model's network is a {library} module: use estimator='standard' or "
                              "'per_example'")
    rules = local_rules(guide, params)
    if not rules:
        raise InputError("estimator", "local", "a guide with a dense weight site of a Gaussian or binary "
                         "dropout family, or a convolution kernel of a Gaussian family",
                         hint="use estimator='per_example' (a weight draw per example)")

    with local_noise(rules) as seen:  # the noise keys come from the model's seed: one set per particle
        loss, new_mutable = annealed_elbo_loss(rng_key, params, model, guide, beta, num_particles, x, y, n_data,
                                               temperature=temperature, mutable=mutable)
    missing = sorted(set(rules) - seen)
    if missing:
        words = sorted({rules[path].module_words for path in missing})
        raise InputError("estimator", "local", "weight sites computed by Haiku hk.Linear (dense) or "
                         "hk.ConvND (convolution) modules",
                         hint=f"the network never called {missing} as {' or '.join(words)}")
    return loss, new_mutable
