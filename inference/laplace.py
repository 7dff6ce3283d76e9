"""`laplace`: the Laplace approximation after training, N(theta*, (GGN + delta I)^-1) around a point estimate,
with the GGN curvature (`inference.laplace_curvature`), a choice of structure, the linearised (GLM) or
sampled-network predictive (`inference.laplace_posterior`) and the prior precision delta chosen by the Laplace
marginal likelihood (`inference.laplace_evidence`) unless given.
"""

from __future__ import annotations

import dataclasses
import math
import time

import numpy as np

from base.errors import ArgumentTypeError, InputError
from base.validation import check_choice
from inference.data_args import labelled_arrays
from inference.laplace_blocks import dense_block
from inference.laplace_curvature import check_likelihood, ggn
from inference.laplace_dense_layer import dense_layer_ggn
from inference.laplace_evidence import block_evidence, optimise_prior_precision
from inference.laplace_kfac import diag_layer_blocks, kfac_blocks
from inference.laplace_layers import find_layers
from inference.laplace_posterior import PREDICTIVES, LaplacePosterior
from inference.model_identity import data_fingerprint
from inference.posterior import Posterior
from models.bridge import BNN

STRUCTURES = ("last_layer", "kfac", "diag", "full")
PRIOR_STRUCTURES = ("layer", "scalar")
WEIGHT_SCALE = "weight_scale"
FULL_LIMIT = 10_000
"""The most parameters a dense GGN block ("full", "last_layer") may cover: its P x P float64 matrix (800 MB at
the limit) and its eigendecomposition (about a minute on 2 cores) grow as P^2 and P^3."""


def laplace(model, point_posterior, data, /, *, structure: str = "last_layer", predictive: str = "glm",
            prior_precision: float | str | None = None, prior_structure: str = "layer", validation=None,
            sites=None, chunk_size: int | None = None) -> LaplacePosterior:
    """The Laplace posterior of `model` around the point estimate of `point_posterior` (Daxberger et al. 2021,
    "Laplace Redux"; Immer et al. 2021): N(theta*, (GGN + delta I)^-1) over the covered weights, every other
    site held at theta*.

    Args:
      model: the `models.BNN` the point estimate was fitted for.
      point_posterior: a `Posterior` of `model`, usually ``inference.fit(model, inference.point_estimate.point_estimate(model),
        data)``; theta* is its ``median()`` (for a point estimate, its location) and its network state is kept.
      data: the training data, a `base.data.Dataset` or (x (N, *feature_shape), y (N,)): the GGN sums over it.
      structure: which GGN blocks are kept (P: the covered parameters):
        "last_layer": the full GGN over the sites of the network's last layer (its weights and bias: the sites of
          the module whose weight the traced network uses last, `last_layer_sites`; P <= `FULL_LIMIT`; a dense
          layer's GGN comes from its own per-example factors, `inference.laplace_dense_layer`);
        "kfac": one Kronecker-factored block A (x) G per dense or convolution weight (A = E[a a^T] of the layer's
          inputs, G = sum of g g^T of its output gradients, with the exact output-Hessian factor M, so no labels
          are sampled; `inference.laplace_kfac`), every other site (biases) in an exact diagonal block;
        "diag": the GGN's exact diagonal over every weight site (a dense layer's from its own factors, no
          per-example weight gradients; `inference.laplace_kfac.diag_layer_blocks`), a prior precision per site;
        "full": the full GGN over every weight site (P <= `FULL_LIMIT`, InputError naming P otherwise).
      predictive: "glm" (the linearised network f(x, theta*) + J(x)(theta - theta*), Immer et al. 2021: the
        default) or "mc" (the network itself at each weight draw; it underfits, kept for comparison).
      prior_precision: delta > 0 of the prior N(0, delta^-1 I) on every covered weight, or None (default): chosen
        by the Laplace evidence (`inference.laplace_evidence`; a grid and then Brent on a 1-D function, exact for
        the eigenvalues held), as `prior_structure` says. The point estimate itself was fitted with the model's
        own prior (e.g. Normal(0, s): precision 1/s^2) and is not refitted: as in Laplace Redux, delta is fitted
        post hoc and enters only the curvature (the posterior's spread), so it can differ from 1/s^2.
        ``prior_precision="weight_scale"``: delta_b = P_b / ||theta*_b||^2 per block, the prior whose variance is
        the mean square of the block's fitted weights (a rule that needs no held-out data; on USPS digits it beat
        the point estimate, less than `validation` did: docs/laplace.md).
      prior_structure: with ``prior_precision=None``, "layer" (default): one delta_b per curvature block (a KFAC
        layer's weight, a diag block's site, a dense block), each maximising its own block's evidence terms (the
        evidence splits by block); or "scalar": one delta for all. Per layer is the default (the layer-wise prior
        precision Laplace libraries offer: layers hold weights of different scales); on USPS digits it changed little (KFAC validation NLL 0.71
        against 0.73 for one delta).
      validation: held-out data (a `base.data.Dataset` or (x, y), never the test set), or None (default). Given
        (and ``prior_precision=None``), one delta for all blocks is chosen instead of the evidence's: the one
        that maximises the log predictive density of these data under the chosen predictive
        (`select_by_validation`; the usual alternative to the evidence: the prior precision by held-out data). On
        USPS digits (docs/laplace.md) the evidence's delta (2 to 13) gave posteriors far too wide for the GLM
        predictive (validation NLL 0.46 to 0.91 against the point estimate's 0.14) and the validation choice beat
        the point estimate.
      sites: the site names to cover instead of the structure's own choice (any structure but "kfac" covers
        exactly these).
      chunk_size: examples per compiled curvature chunk (default: as many as fit in 128 MiB of gradients).

    Returns:
      A `LaplacePosterior`; its ``config["laplace"]`` records structure, predictive, the prior precisions (one per
      block) and how they were chosen, the log evidence, the covered parameter count and the seconds the curvature took.
    Raises:
      InputError naming the argument: a model that is not a BNN or not the posterior's, an unknown structure or
      predictive, a likelihood without a known GGN, a dense block above `FULL_LIMIT`, a bad prior precision.
    """
    start = time.perf_counter()
    if not isinstance(model, BNN):
        raise ArgumentTypeError("model", model, "a models.BNN (built with models.bnn or zoo.get)")
    if not isinstance(point_posterior, Posterior):
        raise ArgumentTypeError("point_posterior", point_posterior, "an inference.Posterior of `model`")
    if point_posterior.model is not model:
        raise InputError("point_posterior", f"<a posterior of model {point_posterior.model.name!r}>",
                         "a posterior of the very `model` passed")
    check_choice("structure", structure, STRUCTURES)
    check_choice("predictive", predictive, PREDICTIVES)
    check_choice("prior_structure", prior_structure, PRIOR_STRUCTURES)
    check_likelihood(model.likelihood)
    if prior_precision is not None and prior_precision != WEIGHT_SCALE and not (
            isinstance(prior_precision, (int, float, np.floating)) and np.isfinite(prior_precision)
            and prior_precision > 0):
        raise InputError("prior_precision", prior_precision,
                         f"None (by the evidence), {WEIGHT_SCALE!r} or a finite number > 0")
    feature_shape = tuple(point_posterior.feature_shape)
    x, y = labelled_arrays(model, data, "the Laplace curvature")
    center = {k: np.asarray(v, np.float32) for k, v in point_posterior.median().items()}
    state = point_posterior.state
    shapes = {k: tuple(v) for k, v in model.site_shapes(feature_shape).items()}
    weights = [k for k in shapes if k not in model.likelihood.latent_sites()]
    if sites is None and structure == "last_layer":
        sites = last_layer_sites(model, center, weights, x, state)
    covered = _covered_sites(weights, sites)
    size = sum(math.prod(shapes[k]) for k in covered)
    if structure in ("last_layer", "full") and size > FULL_LIMIT:
        raise InputError("structure", structure, f"a structure whose dense GGN covers at most {FULL_LIMIT} "
                         f"parameters (these sites hold {size})", 'use "kfac" or "diag"')
    if structure == "kfac":
        blocks = kfac_blocks(model, center, covered, x, state, chunk_size)
    elif structure == "diag":
        blocks = diag_layer_blocks(model, center, covered, x, state, chunk_size)
    else:
        matrix = dense_layer_ggn(model, center, covered, x, state)  # one dense layer: by its own factors
        if matrix is None:
            matrix = ggn(model, center, covered, x, state, "dense", chunk_size)
        blocks = [dense_block(covered, matrix)]
    log_lik = float(np.sum(point_posterior.log_likelihood(x, y, draws={k: v[None] for k, v in center.items()})))
    sq_norms = [float(sum(np.sum(np.square(center[k], dtype=np.float64)) for k in b.sites)) for b in blocks]
    eigvals = [b.eigvals() for b in blocks]
    if prior_precision == WEIGHT_SCALE:
        deltas = [b.eigvals().size / n for b, n in zip(blocks, sq_norms)]
        source = "the fitted weights' scale, one per block"
    elif prior_precision is not None:
        deltas, source = [float(prior_precision)] * len(blocks), "given"
    elif prior_structure == "scalar":
        deltas = [optimise_prior_precision(sum(sq_norms), np.concatenate(eigvals))] * len(blocks)
        source = "marginal likelihood, one for all blocks"
    else:
        deltas = [optimise_prior_precision(n, e) for n, e in zip(sq_norms, eigvals)]
        source = "marginal likelihood, one per block"
    posterior = LaplacePosterior(model=model, feature_shape=feature_shape, state=state,
                                 config=dict(point_posterior.config), info=point_posterior.info,
                                 losses=point_posterior.losses, training_data=data_fingerprint(x, y), mean=center,
                                 blocks=blocks, structure=structure, predictive=predictive, prior_precision=deltas)
    if validation is not None and prior_precision is None:
        deltas = [select_by_validation(posterior, validation)] * len(blocks)
        source = "validation log predictive density, one for all blocks"
        posterior.prior_precision = deltas
    evidence = block_evidence(deltas, log_lik, sq_norms, eigvals)
    record = {"structure": structure, "predictive": predictive, "prior_structure": prior_structure,
              "prior_precision": deltas,
              "prior_precision_source": source, "log_evidence": evidence, "log_likelihood": log_lik,
              "num_covered": int(size), "seconds": time.perf_counter() - start}
    posterior.config["laplace"] = record
    return posterior


VALIDATION_DRAWS = 30
"""Weight draws per candidate delta in `select_by_validation` (the same draws, rescaled, for every candidate)."""


def select_by_validation(posterior: LaplacePosterior, validation) -> float:
    """The prior precision delta (one for every block) that maximises the mean log predictive density
    (1/N) sum_n log (1/S) sum_s p(y_n | x_n, theta_s) of `validation` (a Dataset or (x, y)) under `posterior`'s
    predictive, S = `VALIDATION_DRAWS` draws with seed 0 for every candidate (common random numbers: one noise,
    rescaled by each delta). Candidates: decades from 1e6 down to 1e-4, stopping two decades past the best
    (the density is unimodal in practice: near the point estimate at large delta, falling as the spread grows
    too wide), then quarter decades within half a decade of the best."""
    x, y = labelled_arrays(posterior.model, validation, "choosing the prior precision")
    blocks = len(posterior.blocks)

    def score(log10_delta: float) -> float:
        candidate = dataclasses.replace(posterior, prior_precision=[10.0 ** log10_delta] * blocks)
        return float(np.mean(candidate.log_likelihood(x, y, num_samples=VALIDATION_DRAWS, seed=0,
                                                      reduce="log_mean_exp")))

    scores: dict = {}
    for t in range(6, -5, -1):  # from nearly the point estimate (1e6) down to 1e-4, by decades
        scores[float(t)] = score(t)
        if t <= max(scores, key=scores.__getitem__) - 2:
            break  # two decades past the best without a better one
    best = max(scores, key=scores.__getitem__)
    for t in (best - 0.5, best - 0.25, best + 0.25, best + 0.5):
        if t not in scores:
            scores[t] = score(t)
    return 10.0 ** max(scores, key=scores.__getitem__)


def last_layer_sites(model, center: dict, weights: list, x, state) -> list:
    """The sites of the network's last layer: those sharing the module path (the name up to its last "/") of
    the weight site the traced network uses last (`inference.laplace_layers.find_layers`), e.g.
    ``mlp/~/linear_2/w`` and ``.../b`` (the site order itself is not the layer order: Haiku sorts module names,
    so ``linear_10`` comes before ``linear_2``)."""
    _, order, _ = find_layers(model, center, weights, x[:1], state)
    module = order[-1].rpartition("/")[0]
    return [k for k in weights if k.rpartition("/")[0] == module]


def _covered_sites(weights: list, sites) -> list:
    """The sites covered: `sites` when given (checked; in model order), else every weight site."""
    if sites is not None:
        if isinstance(sites, str) or not all(isinstance(s, str) for s in sites) or not sites:
            raise ArgumentTypeError("sites", sites, "a non-empty list of site names")
        unknown = [s for s in sites if s not in weights]
        if unknown:
            raise InputError("sites", unknown, f"weight sites of the model: {weights}")
        return [s for s in weights if s in sites]
    return list(weights)
