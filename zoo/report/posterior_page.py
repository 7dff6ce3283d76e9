"""The sections of a report on one saved posterior (`zoo fit` / `zoo nuts` --out): the fit, ArviZ's diagnostics,
the scores, and for image classifiers the corrupted sets and out-of-distribution detection.

Each ``*_section(page, ...)`` appends to a `zoo.report.html.Page`; `posterior_sections` runs them in order for a
posterior and its rebuilt catalogue entry (`zoo.checkpoints.load_entry`).
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass

import numpy as np
import pandas as pd

from zoo.report.html import Page

CAPTIONS = {
    "loss": "The negative ELBO per step (log scale when positive): look for a curve that has flattened by the last "
            "steps; one still falling means the fit stopped before it converged.",
    "settings": "How this posterior was made, as its checkpoint records it: compare these before comparing scores.",
    "info": "What the fit or the sampler recorded: the convergence and collapse judgements are the ones to read "
            "first.",
    "rhat": "Per site, the worst entry: R-hat above 1.01 or a bulk ESS below 100 per chain means the chains have not "
            "mixed, and every number below is then unreliable.",
    "predictive_rhat": "The same diagnostics for the predicted class probabilities at the first test inputs: "
                       "what matters for the scores, even where single weights mix badly.",
    "rank": "Rank plots of the entries with the largest R-hat: chains that mix give flat histograms (or ECDF "
            "differences near 0) that overlap; a chain above or below the others is stuck.",
    "trace": "Trace plots of the same entries: the chains' densities should overlap and their draws look like "
             "noise around one level, with no trend and no chain apart.",
    "spread": "Per site, the marginal posterior standard deviations of its entries: a site whose sds sit at the "
              "prior's scale learnt nothing from the data; sds near 0 behave like a point estimate.",
    "spread_table": "Marginal posterior sds per site (mean, median, extremes) beside the mean |mean| of its entries.",
    "scores": "Scores on the test set: accuracy and NLL say how good the predictions are, ECE how well their "
              "confidence matches their accuracy (0 is perfect).",
    "reliability": "Accuracy against confidence per bin: bars on the diagonal are calibrated, bars below it "
                   "over-confident, above it under-confident.",
    "corruptions": "Each metric against corruption severity (0 = clean), the mean over corruption types: accuracy "
                   "should fall and NLL, ECE and entropy rise slowly, not jump.",
    "corruption_table": "The corrupted sets summarised as in the rank-1 paper's Table 2: cNLL / cA / cECE are the "
                        "means over severities and types.",
    "detection": "Out-of-distribution detection: AUROC near 1 and FPR at 95 % TPR near 0 mean the posterior's "
                 "uncertainty flags the shifted inputs; AUROC 0.5 means it cannot tell them from test inputs. "
                 "OUT inputs are the positive class of AUROC and AUPR-out, IN inputs that of AUPR-in and FPR at "
                 "95 % TPR.",
    "detection_plot": "Uncertainty of the test inputs (grey) against each shifted set (outlines), one panel per "
                      "score: the less an outline overlaps the grey, the better the posterior flags that set.",
}


@dataclass(frozen=True)
class ReportSettings:
    """The sizes of a report's computations: predictive draws for the scores and OOD detection (`num_samples`),
    draws and corruption types / severities of the corrupted sets (None: all 19 types), the test inputs of the
    predictive R-hat (`probe`), how many weight entries the rank and trace plots show, and the draws of an SVI
    posterior's spread per site (`spread_draws`)."""

    num_samples: int = 100
    corruption_draws: int = 10
    corruption_types: tuple | None = None
    severities: tuple = (1, 2, 3, 4, 5)
    probe: int = 20
    traced_entries: int = 4
    spread_draws: int = 200
    seed: int = 0


def _flat(record, prefix: str = "") -> dict:
    """A nested dict as {dotted key: value} (lists and scalars kept as text)."""
    out = {}
    for key, value in (record or {}).items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(_flat(value, name + "."))
        else:
            out[name] = value if isinstance(value, (int, float, str, bool)) or value is None else json.dumps(value)
    return out


def drawn(draw) -> bytes:
    """The PNG bytes a plot function writes: ``draw(target)`` is called with a binary file object as the path."""
    buffer = io.BytesIO()
    draw(buffer)
    return buffer.getvalue()


def _key_value(record: dict) -> pd.DataFrame:
    values = [f"{v:.4g}" if isinstance(v, float) else str(v) for v in record.values()]
    return pd.DataFrame({"value": values}, index=pd.Index(list(record), name="setting"))


def fit_section(page: Page, post) -> None:
    """Kind and settings, the recorded verdicts (convergence, collapse, divergences) and the loss curve."""
    from evals import plots
    from evals.scoring import posterior_label

    page.heading("The fit")
    info = getattr(post, "info", None)
    page.text(f"Posterior: {posterior_label(post)} ({post.kind}).")
    if info is not None and hasattr(info, "converged"):
        verdict = info.summary()
        bad = info.converged is False or bool(info.collapsed)
        page.text(f"Verdict: {verdict}", css="verdict-bad" if bad else "verdict-good")
    elif info is not None and hasattr(info, "divergences"):
        bad = bool(info.divergences)
        page.text(f"Verdict: {info.divergences} divergent transitions after warm-up, {post.num_chains} chains of "
                  f"{post.num_draws // max(1, post.num_chains)} draws.", css="verdict-bad" if bad else "verdict-good")
    losses = getattr(post, "losses", None)
    if losses is not None and len(losses):
        png = drawn(lambda target: plots.loss_curve(np.asarray(losses), target, "loss per step"))
        page.figure(png, CAPTIONS["loss"], "loss curve")
    settings = _flat({"guide": getattr(getattr(post, "guide", None), "config", None), "config": post.config})
    if settings:
        page.table(_key_value(settings), CAPTIONS["settings"])
    if info is not None:
        page.table(_key_value(_flat(info._asdict())), CAPTIONS["info"], folded="Everything the run recorded")


def _worst_entries(summary: pd.DataFrame, count: int) -> list:
    """The row names of `summary` (``name[i, j]``) with the largest R-hat (NaN last), `count` of them."""
    return list(summary["r_hat"].astype(float).fillna(-np.inf).sort_values(ascending=False).index[:count])


def diagnostics_section(page: Page, post, entry, settings: ReportSettings) -> None:
    """NUTS: R-hat / ESS per site, of the predictive probabilities, rank and trace plots of the worst entries.
    SVI and Laplace: the posterior sd per site (table and box plot)."""
    from evals import arviz_plots
    from evals.comparison import chain_draws, to_inference_data
    from evals.posterior_spread import plot_site_spread, site_spread
    from inference import arviz_compat, diagnostics

    page.heading("ArviZ diagnostics")
    draws = chain_draws(post, num_samples=settings.spread_draws, seed=settings.seed)
    if post.kind != "mcmc":
        page.text("One chain of independent draws from the fitted posterior: R-hat and rank plots, which compare "
                  "chains, do not apply; the spread per site shows what the fit learnt.")
        page.table(site_spread(draws), CAPTIONS["spread_table"])
        page.figure(drawn(lambda target: plot_site_spread(draws, target)), CAPTIONS["spread"], "posterior sd per site")
        return
    summary = arviz_compat.summary(to_inference_data(draws))
    site_of = {_arviz_name(site): site for site in draws}
    summary["site"] = [site_of.get(name.split("[")[0], name.split("[")[0]) for name in summary.index]
    per_site = summary.groupby("site", sort=False).agg(entries=("r_hat", "size"), r_hat_max=("r_hat", "max"),
                                                       ess_bulk_min=("ess_bulk", "min"),
                                                       ess_tail_min=("ess_tail", "min"))
    page.table(per_site, CAPTIONS["rhat"])
    if entry is not None and getattr(entry.model.likelihood, "classification", False):
        probe = entry.test.x[: settings.probe]
        page.table(diagnostics.predictive_summary(post, probe, seed=settings.seed), CAPTIONS["predictive_rhat"])
    worst = _worst_entries(summary, settings.traced_entries)
    chosen = {}
    for label in worst:
        name, _, index = label.partition("[")
        site = site_of.get(name, name)
        flat = np.asarray(draws[site]).reshape(draws[site].shape[:2] + (-1,))
        position = 0 if not index else int(np.ravel_multi_index(
            tuple(int(i) for i in index.rstrip("]").split(",")), draws[site].shape[2:]))
        chosen[f"{site}[{index.rstrip(']')}]" if index else site] = flat[..., position]
    subset = to_inference_data(chosen)
    page.figure(arviz_plots.rank(subset), CAPTIONS["rank"], "rank plots")
    page.figure(arviz_plots.trace(subset), CAPTIONS["trace"], "trace plots")


def _arviz_name(site: str) -> str:
    from inference.site_names import arviz_name

    return arviz_name(site)


def scores_section(page: Page, post, entry, settings: ReportSettings) -> None:
    """The test-set scores (`evals.score`) and, for a classifier, its reliability diagram."""
    import evals
    from evals import plots

    page.heading("Scores")
    table = evals.score(post, entry.test, num_samples=settings.num_samples, seed=settings.seed, verbose=False)
    page.table(table, CAPTIONS["scores"])
    if getattr(entry.model.likelihood, "classification", False):
        probs = np.asarray(post.predict(entry.test.x, settings.num_samples, seed=settings.seed, reduce="mean"))
        png = drawn(lambda target: plots.reliability_diagram({table.index[0]: probs}, entry.test.y, target))
        page.figure(png, CAPTIONS["reliability"], "reliability diagram")


def raw_images(entry):
    """(raw test images (N, H, W, C) in [0, 1], the map raw -> inputs): the entry's inputs mapped to [0, 1] by the
    training inputs' smallest and largest value (an affine map, exact for inputs standardised by scalars, as the
    catalogue's image sets are), or None for an entry whose data are not images."""
    shape = entry.test.image_shape
    if shape is None:
        return None
    lo, hi = float(np.min(entry.train.x)), float(np.max(entry.train.x))
    scale = (hi - lo) or 1.0
    raw = np.clip((np.asarray(entry.test.x, np.float32) - lo) / scale, 0.0, 1.0).reshape((-1, *shape))
    feature_shape = tuple(entry.test.x.shape[1:])

    def to_inputs(x):
        return (np.asarray(x, np.float32) * scale + lo).reshape((len(x), *feature_shape))

    return raw, to_inputs


def shift_section(page: Page, post, entry, settings: ReportSettings) -> None:
    """For an image classifier: the corrupted test sets (`evals.ood`) and OOD detection (`evals.detection`) of the
    test images against the shifts of `zoo.data.shifted` and the corrupted images at the highest severity."""
    from evals import detection, ood
    from evals.corruptions import corrupted
    from evals.scoring import posterior_label
    from zoo.data.shifted import detection_sets

    images = raw_images(entry)
    if images is None or not getattr(entry.model.likelihood, "classification", False):
        return
    raw, to_inputs = images
    label = posterior_label(post)
    page.heading("Corrupted test sets")
    test = type("Raw", (), {"x": raw, "y": np.asarray(entry.test.y)})
    sets = list(corrupted(test, types=settings.corruption_types, severities=tuple(settings.severities), seed=0,
                          image_shape=raw.shape[1:]))
    results = ood.score_sets({label: post}, sets, clean=(raw, entry.test.y), num_samples=settings.corruption_draws,
                             seed=settings.seed, preprocess=to_inputs, max_rows=20_000)
    page.table(ood.summary_table(results, reference=None), CAPTIONS["corruption_table"])
    page.figure(drawn(lambda target: ood.plot_severity(results, target)), CAPTIONS["corruptions"],
                "metrics against corruption severity")
    page.heading("Out-of-distribution detection")
    out_sets = detection_sets(raw, sets, seed=settings.seed)
    kwargs = {"num_samples": settings.num_samples, "seed": settings.seed, "preprocess": to_inputs}
    scores_in = detection.detection_scores(post, raw, **kwargs)
    scores_out = {name: detection.detection_scores(post, x, arg=name, **kwargs) for name, x in out_sets.items()}
    table = pd.concat({name: detection.detection_table(scores_in, s) for name, s in scores_out.items()},
                      names=["out_set"])
    page.table(table, CAPTIONS["detection"])
    page.figure(drawn(lambda target: detection.plot_detection(scores_out, scores_in, target)),
                CAPTIONS["detection_plot"], "uncertainty histograms, in against out")


def posterior_sections(page: Page, post, entry, settings: ReportSettings) -> None:
    """Every section of a posterior's report, in order (the entry's test set for scores)."""
    fit_section(page, post)
    diagnostics_section(page, post, entry, settings)
    scores_section(page, post, entry, settings)
    shift_section(page, post, entry, settings)
