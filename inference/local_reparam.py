"""The ELBO with the local reparameterisation trick (Kingma et al., 2015) on a guide's dense layers.

    loss = -( E[log p(y | x, h)] * N/B / T  -  beta * KL(q || p) )

estimated like `inference.elbo.annealed_elbo_loss`, except that the likelihood of every dense weight site
whose family offers a local rule (``family.local_rule``: the factorised Gaussians, mean field, k-tied
N(mu, (U Vᵀ)²), variance layers N(mu, alpha mu²), zero-mean N(0, sigma²), and binary dropout; a new family by its
own method, `local_rules`) is computed from pre-activations drawn per example and unit (`models.local_reparam`): the
exact marginal of `inference.per_example`'s independent weight draw per example, so both estimate the same
expected log-likelihood, at the cost of two matrix products instead of B weight draws and a vmap over the
examples. Convolution kernels of those Gaussian families use Flipout (Wen et al., 2018): example n's kernel
M + dW o (s_n r_nᵀ) with random signs, marginally a weight draw (so again the same expectation), the examples'
noise decorrelated, for a second convolution. Other stochastic sites (other families, dropout on a kernel) keep
one draw per minibatch, which is also unbiased. The KL term is the one of `annealed_elbo_loss` (closed form where NumPyro has one; the guide's
own draw otherwise). Batch norm works (the minibatch is one batch).
"""

from __future__ import annotations

from inference.elbo import annealed_elbo_loss
from base.errors import InputError
from models.local_reparam import local_noise

__all__ = ["local_rules", "local_reparam_elbo_loss"]


def local_rules(guide, params: dict) -> dict:
    """{module path: rule} for the real weight sites (leaf ``w``) of a guide whose sites have variational families
    (``guide.family_of(site)``, a `SiteGuide`): each family says its own rule, ``family.local_rule(site, values)``
    from the constrained guide ``params`` (a `models.local_reparam` rule, or None: none for this site; a family
    without the method has none). The built-in Gaussian families give `GaussianRule` on a dense (2-D) site and
    `FlipoutRule` on a convolution kernel (`inference.families.gaussian_local_rule`), k-tied without a scale cap
    `KTiedRule`, binary dropout `DropoutRule` on a dense site. The module path of site ``a/~/b/w`` is ``a/b``
    (`models.local_reparam.local_noise`). A guide without families (one Gaussian over blocks of sites,
    `inference.joint_gaussian.JointGaussian`) is refused: InputError naming ``estimator``."""
    family_of = getattr(guide, "family_of", None)
    if not callable(family_of):
        name = getattr(guide, "config", {}).get("name", type(guide).__name__)
        raise InputError("estimator", "local", "a guide whose weight sites have variational families with a local "
                         "rule (mean_field, k_tied, zero_mean, variance_layers, binary_dropout, by_site...)",
                         hint=f"the {name} guide draws blocks of sites jointly, with no per-site rule: use "
                              "estimator='standard' or 'per_example'")
    rules: dict = {}
    for name, site in guide.sites.items():
        path, _, leaf = name.replace("/~/", "/").rpartition("/")
        if not site.is_real or leaf != "w":
            continue
        family = family_of(name)
        rule_of = getattr(family, "local_rule", None)
        if not callable(rule_of):
            continue
        rule = rule_of(site, {s: params[guide.param_name(name, s)] for s in family.params(site)})
        if rule is not None:
            rules[path] = rule
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
