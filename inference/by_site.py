"""`by_site`: one guide whose variational family is chosen per site by shell pattern.

    inference.by_site(model, {"*/linear_0/*": "zero_mean", "*/w": ("k_tied", {"rank": 2})},
                      default="point_estimate")

puts the zero-mean guide on the first dense layer (a variance layer, ``variance-networks.txt`` sec. 6),
the k-tied Normal on the other weight matrices (``k-tied-normal.txt``; the papers also combined k-tied
dense layers with mean-field conv layers) and a point estimate (Delta) on everything else.
Each site gets the family of the FIRST pattern (in dict order) that matches its name, else `default`.
With ``default=None`` a site no pattern covers is refused with a ValueError; a pattern that matches no
site is refused too: a site is never silently dropped.

Families: ``"point_estimate"`` (Delta), ``"mean_field"`` (Normal, kwarg ``init_scale``) and every
registered per-site guide (`inference.per_site.PerSiteGuide` subclasses: ``"k_tied"``,
``"zero_mean"``, ``"variance_layers"``, ...), built with the given kwargs; a guide that takes
``variance_sites`` gets the pattern itself unless the kwargs name them.

Unlike NumPyro's ``AutoGuideList``, whose ``sample_posterior`` hands the same rng key to every part so
that two similar parts draw perfectly correlated noise (corr = 1.0 measured,
reference/numpyro-facts.md), this is one guide in which every site is drawn with its own key.
Parameters are named ``{site}_{prefix}_{suffix}`` as in the single-family guides.
"""

from __future__ import annotations

import fnmatch
import inspect

import jax
import jax.numpy as jnp
import numpyro.distributions as dist

from inference.per_site import PerSiteGuide

BUILT_IN = ("point_estimate", "mean_field")


class DeltaSites(PerSiteGuide):
    """Family "point_estimate": q(w) = delta(w - loc) per site. Parameters: ``_loc``, 1 per entry."""

    def __init__(self, model, *, prefix: str = "auto"):
        super().__init__(model, init_scale=1.0, prefix=prefix)

    def site_distribution(self, name, shape, param):
        """Delta at the learned location (event shape `shape`)."""
        return dist.Delta(param("loc", self.init_loc(name)), event_dim=len(shape))

    def num_params_formula(self) -> int:
        """One location per entry."""
        return self.num_latent()


class NormalSites(PerSiteGuide):
    """Family "mean_field": q(w) = N(loc, scale²) per entry. Parameters: ``_loc``, ``_scale``, 2 per entry."""

    def __init__(self, model, *, init_scale: float = 1e-3, prefix: str = "auto"):
        super().__init__(model, init_scale=init_scale, prefix=prefix)

    def site_distribution(self, name, shape, param):
        """N(loc, scale²), scale starting at `init_scale` (event shape `shape`)."""
        loc = param("loc", self.init_loc(name))
        scale = param("scale", jnp.full(shape, self._init_scale), self.scale_constraint)
        return dist.Normal(loc, scale).to_event(len(shape))

    def num_params_formula(self) -> int:
        """Two parameters per entry."""
        return 2 * self.num_latent()


def normalize_spec(spec, arg: str) -> list:
    """A family spec ("name" or (name, {kwargs})) as the JSON-stable list [name, {kwargs}]."""
    if isinstance(spec, str):
        return [spec, {}]
    if isinstance(spec, (tuple, list)) and len(spec) == 2 and isinstance(spec[0], str) and isinstance(spec[1], dict):
        return [spec[0], dict(spec[1])]
    raise ValueError(f"{arg}: expected a family name or a (name, kwargs dict) pair, got {spec!r}")


def make_family(model, spec: list, pattern: str, prefix: str) -> PerSiteGuide:
    """The per-site guide object of family spec [name, kwargs] for the sites matching `pattern`."""
    from inference.registry import GUIDES

    name, kwargs = spec
    if name == "point_estimate":
        return DeltaSites(model, prefix=prefix, **kwargs)
    if name == "mean_field":
        return NormalSites(model, prefix=prefix, **kwargs)
    factory = GUIDES.get(name)
    if factory is None:
        raise ValueError(f"families: unknown family {name!r}; expected one of {sorted(set(BUILT_IN) | set(GUIDES))}")
    if "variance_sites" in inspect.signature(factory).parameters and "variance_sites" not in kwargs:
        kwargs = {**kwargs, "variance_sites": [pattern]}
    try:
        guide = factory(model, prefix=prefix, **kwargs)
    except TypeError as e:
        raise ValueError(f"families: family {name!r} does not take the keyword arguments {kwargs}: {e}") from None
    if not isinstance(guide, PerSiteGuide):
        raise ValueError(f"families: {name!r} is not a per-site guide; by_site combines {list(BUILT_IN)} and "
                         "PerSiteGuide families (k_tied, zero_mean, variance_layers, ...)")
    return guide


class BySite(PerSiteGuide):
    """A guide combining per-site families chosen by shell pattern (see the module docstring).

    Args:
      model: a `models.BNN`.
      families: {pattern: family spec}, a spec being a name or (name, kwargs); first match wins.
      default: family spec for sites no pattern matches, or None to refuse them.
    """

    def __init__(self, model, families: dict, *, default="point_estimate", prefix: str = "auto"):
        if not isinstance(families, dict) or not families:
            raise ValueError(f"families: expected a non-empty {{pattern: family}} dict, got {families!r}")
        self.families = {str(p): normalize_spec(s, f"families[{p!r}]") for p, s in families.items()}
        self.default = None if default is None else normalize_spec(default, "default")
        super().__init__(model, init_scale=1.0, prefix=prefix)
        # Build once now so that unknown names and bad kwargs fail at construction, not at fit time.
        self._family_guides = {p: make_family(model, s, p, prefix) for p, s in self.families.items()}
        if self.default is not None:  # key None: the default family
            self._family_guides[None] = make_family(model, self.default, "*", prefix)
        self.config = {"name": "by_site", "families": self.families, "default": self.default, "prefix": prefix}

    def _setup_prototype(self, *args, **kwargs):
        super()._setup_prototype(*args, **kwargs)
        names = list(self._init_locs)
        unmatched = [p for p in self.families if not any(fnmatch.fnmatchcase(n, p) for n in names)]
        if unmatched:
            raise ValueError(f"families: patterns {unmatched} match no site of the model; sites are {names}")
        assignment = {n: next((p for p in self.families if fnmatch.fnmatchcase(n, p)), None) for n in names}
        uncovered = [n for n, p in assignment.items() if p is None]
        if uncovered and self.default is None:
            raise ValueError(f"families: sites {uncovered} match no pattern and default=None; add a pattern for "
                             "them or pass default='point_estimate' (or 'mean_field')")
        self.site_family = assignment  # {site: pattern, or None for the default}
        self._parts = {}
        for pattern, guide in self._family_guides.items():
            sites = [n for n in names if self.site_family[n] == pattern]
            if sites:
                guide.prototype_trace = self.prototype_trace
                guide._init_locs = {n: self._init_locs[n] for n in sites}
                guide._postprocess_fn = self._postprocess_fn
                self._parts[pattern] = guide

    def family_of(self, name: str) -> str:
        """The family name chosen for site `name` (after `setup`)."""
        pattern = self.site_family[name]
        return (self.default if pattern is None else self.families[pattern])[0]

    def site_distribution(self, name, shape, param):
        """The chosen family's distribution for site `name` (event shape `shape`)."""
        return self._parts[self.site_family[name]].site_distribution(name, shape, param)

    def sample_posterior(self, rng_key, params, *args, sample_shape=(), **kwargs):
        """{site: sample_shape + site shape}: each family draws with its own key, each site with its own."""
        keys = jax.random.split(rng_key, len(self._parts))
        return self._in_model_order(part.sample_posterior(key, params, sample_shape=sample_shape)
                                    for key, part in zip(keys, self._parts.values()))

    def _in_model_order(self, dicts) -> dict:
        merged = {k: v for d in dicts for k, v in d.items()}
        return {k: merged[k] for k in self._init_locs}

    def median(self, params):
        """{site: site shape}: every family's own median."""
        return self._in_model_order(part.median(params) for part in self._parts.values())

    def quantiles(self, params, quantiles):
        """{site: (Q,) + site shape}: every family's own marginal quantiles."""
        return self._in_model_order(part.quantiles(params, quantiles) for part in self._parts.values())

    def num_params_formula(self) -> int:
        """Sum of each family's formula over its own sites (after `setup`)."""
        return sum(part.num_params_formula() for part in self._parts.values())


def by_site(model, families: dict, *, default="point_estimate", prefix: str = "auto") -> BySite:
    """One guide with a family per site: ``families`` {shell pattern: name | (name, kwargs)}, first match
    wins; sites no pattern matches get `default` (a spec, or None to refuse them). See `BySite`."""
    return BySite(model, families, default=default, prefix=prefix)
