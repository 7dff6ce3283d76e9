"""`LaplacePosterior`: a Gaussian N(theta*, (GGN + delta I)^-1) around a point estimate theta*, kept as curvature
blocks in their eigenbases (`inference.laplace_blocks`), with its predictive: the linearised network ("glm") or
the network itself ("mc") run on weight draws. `inference.laplace` builds one.

Its draws are weight draws {site: (S, *shape)} (sites the blocks do not cover sit at theta*), so `predict`,
`log_likelihood`, `to_arviz`, `evals.score` and `save` / `load` take it like any other `Posterior`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import jax
import jax.numpy as jnp
import numpy as np

from base.errors import InputError
from base.validation import check_memory, check_positive_ints, check_seed, num_latent
from base.value_key import value_key
from inference.laplace_blocks import Block
from inference.posterior import OnDemandPosterior
from models.bridge import BNN

PREDICTIVES = ("glm", "mc")


class LinearisedBNN(BNN):
    """A `models.BNN` whose network is replaced by its first-order Taylor expansion at theta* (Immer et al. 2021,
    eq. 6): f_lin(x, theta) = f(x, theta*) + J(x) (theta - theta*), computed by one ``jax.jvp`` per draw (no
    Jacobian is formed). Its ``state`` argument is ``{"network": the network state, "center": theta*}``
    ({site: array}), so theta* is data, not a compiled constant. Every other method is the model's own."""

    def __init__(self, model: BNN):  # super().__init__ is not called: the model's own attributes are shared
        self.__dict__.update(model.__dict__)
        self.base = model

    def apply(self, params: dict, x, state=None):
        """f_lin(x, params): (B, out) for x (B, ...), with theta* = ``state["center"]``."""
        center, network_state = state["center"], state["network"]
        tangent = {k: params[k] - center[k] for k in center}
        out, delta = jax.jvp(lambda p: self.base.apply(p, x, network_state), (center,), (tangent,))
        return out + delta

    def __value_key__(self):
        """("glm", the model's value key): one compile serves every LaplacePosterior of an equal model."""
        return ("glm", value_key(self.base))


@dataclass(kw_only=True)
class LaplacePosterior(OnDemandPosterior):
    """A Laplace posterior (module docstring).

    Attributes (beyond `Posterior`'s):
      mean: {site: array} theta*, every latent site (the point estimate).
      blocks: the curvature blocks (`inference.laplace_blocks.Block`) over the covered sites.
      structure: "last_layer", "kfac", "diag" or "full" (what built the blocks; see `inference.laplace`).
      predictive: "glm" (the linearised network, default) or "mc" (the network itself) on weight draws.
      prior_precision: [delta_b > 0 per block]: the prior N(0, delta_b^-1 I) on block b's weights (one value
        repeated when a single precision was chosen); `prior_precisions` gives them by site.
    ``guide``, ``params``, ``samples`` and ``sample_stats`` are None (it has neither guide parameters nor stored
    draws).
    """

    mean: dict
    blocks: list
    structure: str
    predictive: str = "glm"
    prior_precision: list
    guide = None
    params = None
    samples = None
    sample_stats = None
    _linearised: LinearisedBNN | None = field(default=None, repr=False, compare=False)

    def __post_init__(self):
        super().__post_init__()
        if self.predictive not in PREDICTIVES:
            raise InputError("predictive", self.predictive, f"one of {list(PREDICTIVES)}")
        self.prior_precision = [float(d) for d in np.ravel(self.prior_precision)]
        if len(self.prior_precision) != len(self.blocks) or not all(np.isfinite(d) and d > 0
                                                                   for d in self.prior_precision):
            raise InputError("prior_precision", self.prior_precision,
                             f"one finite number > 0 per curvature block ({len(self.blocks)})")
        self.mean = {k: np.asarray(v) for k, v in self.mean.items()}

    @property
    def kind(self) -> str:
        """"laplace" (read-only)."""
        return "laplace"

    @property
    def covered_sites(self) -> list:
        """The sites the curvature blocks cover (the others are held at theta*), in block order."""
        return [s for b in self.blocks for s in b.sites]

    def unconstrained_params(self) -> dict:
        """Raises InputError: a Laplace posterior has no guide parameters."""
        raise InputError("posterior", "<a 'laplace' Posterior>", "an SVI posterior (guide parameters); a Laplace "
                         "posterior has theta* (posterior.mean) and curvature, not guide parameters")

    def median(self) -> dict:
        """{site: array}: theta* (the Gaussian's mean and median)."""
        return dict(self.mean)

    @property
    def prior_precisions(self) -> dict:
        """{site: delta}: the prior precision of each covered site (the sites of one block share theirs)."""
        return {site: d for block, d in zip(self.blocks, self.prior_precision) for site in block.sites}

    def eigvals(self) -> np.ndarray:
        """(P,) the GGN's eigenvalues over the covered parameters (block by block), float64."""
        return np.concatenate([b.eigvals() for b in self.blocks]) if self.blocks else np.zeros(0)

    def draws(self, num_samples: int | None = None, seed: int = 0) -> dict:
        """{site: (S, *site_shape)}: S = `num_samples` (default 100) exact draws theta* + d, d ~ N(0, (GGN +
        delta I)^-1) block by block (block i from ``fold_in(PRNGKey(seed), i)``); uncovered sites repeat theta*."""
        if num_samples is not None:
            check_positive_ints(num_samples=num_samples)
        check_seed(seed)
        num = 100 if num_samples is None else int(num_samples)
        check_memory("num_samples", num, 4.0 * num * num_latent(self.model, self.feature_shape),
                     f"{num} draws of the weights (float32)")
        shapes = self.site_shapes()
        key = jax.random.PRNGKey(seed)
        out = {k: np.broadcast_to(np.asarray(v, np.float32), (num,) + np.shape(v)) for k, v in self.mean.items()}
        for i, block in enumerate(self.blocks):
            for site, dev in block.deviations(jax.random.fold_in(key, i), num, self.prior_precision[i], shapes).items():
                out[site] = np.asarray(jnp.asarray(self.mean[site], jnp.float32) + dev)
        return {k: out[k] for k in self.site_names}

    def _network(self, fn):
        """(fn, state) per draw: with the GLM predictive the linearised model's method of the same name and
        state {"network": state, "center": theta*}; with "mc" the model's own."""
        if self.predictive == "mc":
            return fn, self.state
        if self._linearised is None:
            self._linearised = LinearisedBNN(self.model)
        center = {k: jnp.asarray(v) for k, v in self.mean.items()}
        return getattr(self._linearised, fn.__name__), {"network": self.state, "center": center}

    # ----- checkpoints ------------------------------------------------------------------------------
    def checkpoint_arrays(self) -> dict:
        """{name: array} `inference.save` writes: ``mean::site`` (theta*) and ``curvature::i::name`` (block i's
        arrays)."""
        out = {f"mean::{k}": np.asarray(v) for k, v in self.mean.items()}
        for i, block in enumerate(self.blocks):
            out.update({f"curvature::{i}::{k}": np.asarray(v) for k, v in block.arrays.items()})
        return out

    def checkpoint_record(self) -> dict:
        """The JSON-able settings `inference.save` writes in place of a guide config (`from_checkpoint` reads it)."""
        return {"name": "laplace", "structure": self.structure, "predictive": self.predictive,
                "prior_precision": list(self.prior_precision), "blocks": [b.record() for b in self.blocks]}

    @classmethod
    def from_checkpoint(cls, record: dict, groups: dict, **common) -> "LaplacePosterior":
        """The posterior `checkpoint_record` / `checkpoint_arrays` describe; `groups`: {"mean": {site: array},
        "curvature": {"i::name": array}}; `common`: the `Posterior` fields."""
        curvature = groups.get("curvature", {})
        blocks = [Block.from_record(r, {k: curvature[f"{i}::{k}"] for k in r["arrays"]})
                  for i, r in enumerate(record["blocks"])]
        return cls(mean=groups["mean"], blocks=blocks, structure=record["structure"],
                   predictive=record["predictive"], prior_precision=list(record["prior_precision"]), **common)
