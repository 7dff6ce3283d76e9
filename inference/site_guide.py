"""`SiteGuide`: a factorised guide with a variational family chosen per site by shell pattern.

    q(w) = prod_sites q_family(site)(w_site)

Each site gets the family of the FIRST pattern (in dict order) that matches its name, else `default`.
A pattern that matches no site is refused, and so is a site no pattern covers when ``default=None``:
a site is never silently dropped. ``mean_field(model)`` is ``SiteGuide(model, {}, default=NormalFamily())``;
k-tied, zero-mean, variance-layer, rank-1 and ``by_site`` guides are other maps.

Parameters are named ``{site}_{prefix}_{suffix}`` (NumPyro's AutoNormal convention, e.g.
``mlp/~/linear_0/w_auto_loc``). Posterior draws give every site its own key (NumPyro's AutoGuideList
hands the same key to each part, so two similar parts draw perfectly correlated noise).
"""

from __future__ import annotations

import fnmatch

import jax
import jax.numpy as jnp
import numpyro
import numpyro.distributions as dist
from numpyro import handlers
from numpyro.distributions import biject_to

from inference.families import Family
from inference.guide_base import BNNGuide
from models.bridge import constrain
from base.prng import normal_draws
from base.errors import InputError
from base.value_key import value_key


class SiteGuide(BNNGuide):
    """A per-site guide (see the module docstring).

    Args:
      model: a `models.BNN`.
      families: {shell pattern: Family}; first match wins.
      default: the Family of sites no pattern matches, or None to refuse them.
      patterns_arg: the argument name used in errors about unmatched patterns (e.g. "variance_sites").
      prefix, config: as `BNNGuide`.
    """

    def __init__(self, model, families: dict, *, default: Family | None, prefix: str = "auto", config: dict,
                 patterns_arg: str = "families"):
        for pattern, family in families.items():
            if not isinstance(family, Family):
                raise InputError.worded(f"{patterns_arg}[{pattern!r}]",
                                        f"{patterns_arg}[{pattern!r}]: expected a variational family, got {family!r}")
        if default is not None and not isinstance(default, Family):
            raise InputError.worded("default", f"default: expected a variational family or None, got {default!r}")
        super().__init__(model, prefix=prefix, config=config)
        self.families = dict(families)
        self.default = default
        self.patterns_arg = patterns_arg
        self.assignment: dict[str, Family] = {}  # {site: Family}, by `check_sites`
        self.finish()

    def __value_key__(self):
        """The guide's configuration, its equality (`BNNGuide`): its {pattern: family} map and default family
        (frozen dataclasses, compared by their fields), its model's value key (`base.value_key`), prefix and site
        shapes; None (identity) for a subclass, which may compute more than these say."""
        if type(self) is not SiteGuide:
            return None
        families = tuple((pattern, value_key(family)) for pattern, family in self.families.items())
        return (families, value_key(self.default), self.model_key())

    def check_sites(self) -> None:
        """Assign a family to every site; refuse unmatched patterns and, with no default, uncovered sites."""
        names = list(self.checked_sites())
        unmatched = [p for p in self.families if not any(fnmatch.fnmatchcase(n, p) for n in names)]
        if unmatched:
            raise InputError.worded(self.patterns_arg,
                                    f"{self.patterns_arg}: patterns {unmatched} match no site of the model; sites are {names}")
        chosen = {n: next((f for p, f in self.families.items() if fnmatch.fnmatchcase(n, p)), self.default)
                  for n in names}
        uncovered = [n for n, f in chosen.items() if f is None]
        if uncovered:
            raise InputError.worded(self.patterns_arg,
                                    f"{self.patterns_arg}: sites {uncovered} match no pattern and default=None; add a "
                                    "pattern for them or pass a default family (e.g. 'point_estimate' or 'mean_field')")
        self.assignment = {n: f for n, f in chosen.items() if f is not None}  # all of them: none is uncovered

    def assigned(self) -> dict[str, Family]:
        """{site: Family} of every site in model order."""
        return self.assignment

    def family_of(self, name: str) -> Family:
        """The family chosen for site `name`."""
        return self.assigned()[name]

    def param_name(self, site: str, suffix: str) -> str:
        """The NumPyro param name of parameter `suffix` of `site`: ``{site}_{prefix}_{suffix}``."""
        return f"{site}_{self.prefix}_{suffix}"

    # ----- the NumPyro guide ----------------------------------------------------------------------
    def __call__(self, *args, **kwargs):
        """One ``numpyro.param`` per family parameter and one ``numpyro.sample`` per site (model order);
        returns {site: constrained value}."""
        self.check_same_sites(args[0] if args else kwargs["x"])
        # every parameter first, then every draw: a random initialiser (k-tied U, V; rank-1 signs) then takes
        # its key from the same position of the seed sequence whatever the sites after it
        values = {name: {suffix: numpyro.param(self.param_name(name, suffix), spec.init, constraint=spec.constraint)
                         for suffix, spec in self.assignment[name].params(site).items()}
                  for name, site in self.sites.items()}
        fns = {}
        for name, site in self.sites.items():
            fn = self.assignment[name].distribution(site, values[name])
            fns[name] = fn if site.is_real else dist.TransformedDistribution(fn, biject_to(site.support))
        bases = [normal_base(fn) for fn in fns.values()]
        keys = [numpyro.prng_key() for _ in fns] if all(base is not None for base in bases) else None
        if keys is None or any(key is None for key in keys):  # not every site Normal, or no seed handler
            return {name: numpyro.sample(name, fn) for name, fn in fns.items()}
        # every site Normal: the keys its sample statements would take, in order, then `base.prng.normal_draws`
        # (the same numbers; one hash for all small draws in the compiled update, a fast one of its own per large one)
        eps = normal_draws(keys, [fn.shape() for fn in fns.values()])
        draws = ([fn.sample(key) for fn, key in zip(fns.values(), keys)] if eps is None
                 else [base.loc + e * base.scale for base, e in zip(bases, eps)])
        result = {}
        for (name, fn), value in zip(fns.items(), draws):
            with handlers.substitute(data={name: value}):
                result[name] = numpyro.sample(name, fn)
        return result

    def distributions(self, params: dict) -> dict:
        """{site: distribution of its unconstrained value} from the constrained guide `params`."""
        assignment = self.assigned()
        out = {}
        for name, site in self.checked_sites().items():
            family = assignment[name]
            out[name] = family.distribution(site, {s: params[self.param_name(name, s)] for s in family.params(site)})
        return out

    def sample_posterior(self, rng_key, params, *args, sample_shape=(), **kwargs):
        """{site: sample_shape + site shape} constrained draws, one independent key per site."""
        dists = self.distributions(params)
        keys = jax.random.split(rng_key, len(dists))
        # one draw per site, not `normal_draws`: in this program the batched draws came out 1 ulp apart from the
        # per-site ones (the compiler's kernels differ), which changed NUTS chains started from them
        latent = {name: fn.sample(key, sample_shape) for (name, fn), key in zip(dists.items(), keys)}
        return constrain(self.sites, latent)

    def median(self, params):
        """{site: site shape}: the elementwise median (the location for Normal, Cauchy, Delta), constrained."""
        return constrain(self.sites, {name: elementwise_icdf(fn, 0.5) for name, fn in self.distributions(params).items()})

    def quantiles(self, params, quantiles):
        """{site: (Q,) + site shape}: elementwise quantiles of the factorised guide, constrained."""
        q = jnp.asarray(quantiles)
        latent = {name: elementwise_icdf(fn, q.reshape((-1,) + (1,) * len(fn.event_shape)))
                  for name, fn in self.distributions(params).items()}
        return constrain(self.sites, latent)

    def num_params_formula(self) -> int:
        """Sum over sites of the site's family formula."""
        assignment = self.assigned()
        return int(sum(assignment[n].num_params(site) for n, site in self.checked_sites().items()))


def normal_base(fn):
    """The `numpyro.distributions.Normal` a draw of `fn` is (``loc + eps * scale``, eps of ``fn.shape()``): `fn`
    itself or the base of an `Independent` of it; None for any other distribution."""
    while isinstance(fn, dist.Independent):
        fn = fn.base_dist
    return fn if type(fn) is dist.Normal else None


def elementwise_icdf(fn, q):
    """Elementwise quantile `q` of a factorised distribution (Independent / expanded Normal, Cauchy, Delta)."""
    while isinstance(fn, (dist.Independent, dist.ExpandedDistribution)):
        fn = fn.base_dist
    if isinstance(fn, dist.Delta):
        return jnp.broadcast_to(fn.v, jnp.broadcast_shapes(jnp.shape(q), jnp.shape(fn.v)))
    return fn.icdf(q)
