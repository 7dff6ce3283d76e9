"""What every guide of the zoo shares: a prototype built from the BNN's static site table.

NumPyro's ``AutoGuide._setup_prototype`` runs ``initialize_model``, which in a fresh process costs
~12 s of small eager compiles (reference/numpyro-facts.md). A `BNN` knows its sites, shapes and
priors without running anything, so `BNNGuide` builds the same prototype trace from that table in
milliseconds and starts every location at Haiku's own initialisation.

Subclass order matters: ``class MyGuide(AutoNormal, BNNGuide)`` puts `BNNGuide._setup_prototype`
where ``AutoGuide._setup_prototype`` was, so AutoNormal's own setup (event dims, ...) runs on top.
Models that are not a `BNN` fall back to NumPyro's path.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpyro
from numpyro import handlers
from numpyro.distributions import biject_to
from numpyro.infer.autoguide import AutoGuide

from models.bridge import BNN


class BNNGuide(AutoGuide):
    """AutoGuide base with a fast prototype for `BNN` models (see the module docstring).

    Subclasses set ``self.config`` (a JSON-able dict with the guide's registry name and keyword
    arguments) so that checkpoints can rebuild them, and may override `covered_sites`.
    """

    config: dict = {}

    def _setup_prototype(self, *args, **kwargs):
        if not isinstance(self.model, BNN):
            return super()._setup_prototype(*args, **kwargs)
        x = args[0] if args else kwargs["x"]
        rng_key = numpyro.prng_key()
        if rng_key is None:
            rng_key = jax.random.PRNGKey(0)
        site_priors = self.model.site_priors(x)
        init = self.model.init_values(rng_key, x)
        self.prototype_trace = self.model.prototype_sites(x, init)
        self._init_locs = {k: biject_to(d.support).inv(init[k]) for k, d in site_priors.items()}
        supports = {k: d.support for k, d in site_priors.items()}

        def postprocess(latent):
            return {k: biject_to(supports[k])(v) if k in supports else v for k, v in latent.items()}

        self._postprocess_fn = postprocess
        self._potential_fn = None
        self._prototype_frames = {}
        self._prototype_plate_sizes = {}
        self._prototype_frame_full_sizes = {}

    def setup(self, x):
        """Build the prototype for inputs shaped like `x` (B, ...) if not built yet; returns self."""
        if self.prototype_trace is None:
            with handlers.block():
                self._setup_prototype(x)
        return self

    def latent_names(self) -> list:
        """Names of the model's latent sites, in model order."""
        return [k for k, s in self.prototype_trace.items() if s["type"] == "sample" and not s["is_observed"]]

    def num_latent(self) -> int:
        """Number of scalar latent values the guide covers (after `setup`)."""
        return int(sum(math.prod(jnp.shape(v)) for v in self._init_locs.values()))

    def num_params(self, params: dict | None = None) -> int:
        """Number of scalar variational parameters, counted from `params` (Posterior.params)."""
        if params is None:
            raise ValueError("params: pass the guide parameters (Posterior.params) to count them")
        return int(sum(math.prod(v.shape) for v in jax.tree.leaves(params)))
