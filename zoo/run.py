"""`zoo run`: the main job, on embedded data only (no download).

1. The digits MLP 64-64 under every guide of `DIGITS_GUIDES`: guide parameter counts, scores, loss
   curves, reliability diagrams.
2. Two-moons MLP 2-16-16-2: mean-field SVI, then NUTS on the same model object started from draws of
   the SVI posterior; scores, divergences, function-space R-hat, an ArviZ summary and `az.compare`.
3. Digits-C: every digits posterior on the 19 corruption types x 5 severities (mCE relative to the
   point estimate), the rank-1 paper's Table 2 layout, severity curves.
Writes results.{csv,json,md}, ood_*.{csv,json,png}, plots and the posteriors under the output folder.
"""

from __future__ import annotations

import json
import os
import time

import numpy as np
import pandas as pd

# (label, zoo entry, entry kwargs, guide registry name, guide kwargs, fit kwargs) fitted on digits by `zoo run`.
_MLP = {"hidden": (64, 64)}
_RANK1_FIT = {"lr": 3e-3, "kl_warmup_fraction": 2 / 3}  # the rank-1 reference: KL annealed over 2/3 of training
DIGITS_GUIDES = [
    ("point_estimate", "mlp", _MLP, "point_estimate", {}, {}),
    ("mean_field", "mlp", _MLP, "mean_field", {}, {}),
    ("1-tied", "mlp", _MLP, "k_tied", {"rank": 1}, {}),
    ("2-tied", "mlp", _MLP, "k_tied", {"rank": 2}, {}),
    ("3-tied", "mlp", _MLP, "k_tied", {"rank": 3}, {}),
    # variance networks: the zero-mean layer has the log-uniform prior, so its KL is a constant (app. C)
    ("zero_mean", "mlp", {**_MLP, "log_uniform_sites": ["mlp/~/linear_1/w"]}, "zero_mean",
     {"variance_sites": ["mlp/~/linear_1/w"]}, {"lr": 3e-3, "kl_warmup_fraction": 0.0}),
    ("rank1_normal", "rank1_mlp", {**_MLP, "factor": "normal"}, "rank1_mixture", {"family": "normal"}, _RANK1_FIT),
    ("rank1_cauchy", "rank1_mlp", {**_MLP, "factor": "cauchy"}, "rank1_mixture", {"family": "cauchy"}, _RANK1_FIT),
    ("batch_ensemble", "rank1_mlp", _MLP, "rank1_mixture", {"family": "delta"}, _RANK1_FIT),
]


def main_job(out: str = "zoo-results", *, quick: bool = False, seed: int = 0, progress: bool = True) -> pd.DataFrame:
    """Run the main job and write its outputs under `out`. Returns the results table.

    `quick` shrinks steps and draws (for smoke tests); the defaults are the documented run.
    """
    import arviz as az
    import optax

    import evals
    import inference
    import zoo
    from evals import plots
    from inference import diagnostics

    os.makedirs(out, exist_ok=True)
    t_start = time.perf_counter()
    rows = []
    settings = {
        "digits_steps": 200 if quick else 3000,
        "moons_steps": 300 if quick else 3000,
        "warmup": 50 if quick else 400,
        "samples": 50 if quick else 400,
        "draws": 20 if quick else 200,
        "ood_draws": 5 if quick else 10,
    }

    _say(f"1/3 digits MLP 64-64 under {len(DIGITS_GUIDES)} guides", progress)
    digits_posts = {}
    for label, entry_name, entry_kwargs, guide_name, guide_kwargs, fit_kwargs in DIGITS_GUIDES:
        digits = zoo.get(entry_name, data="digits", **entry_kwargs)
        guide = inference.make_guide(guide_name, digits.model, **guide_kwargs)
        steps = settings["digits_steps"]
        post = inference.fit(digits.model, guide, digits.train, steps=steps, batch_size=128,
                             optimizer=optax.adam(fit_kwargs.get("lr", 1e-3)),
                             kl_warmup=int(steps * fit_kwargs.get("kl_warmup_fraction", 0.2)), seed=seed,
                             progress=progress, config={"entry": digits.config})
        digits_posts[label] = post
        row = _row("digits", label, post, digits, settings["draws"], seed)
        row["deterministic_acc"] = evals.metrics.accuracy(
            inference.predictions_by_procedure(post, digits.test.x, num_samples=2, seed=seed)["deterministic"],
            digits.test.y)
        if hasattr(guide, "num_params_formula"):
            row["formula_params"] = guide.num_params_formula()
        rows.append(row)
        inference.save(post, os.path.join(out, "posteriors", f"digits_{label}"))
        plots.loss_curve(post.losses, os.path.join(out, f"loss_digits_{label}.png"), f"digits MLP, {label}")
    plots.reliability_diagram({k: p.predict(digits.test.x, settings["draws"]).mean(0) for k, p in digits_posts.items()},
                              digits.test.y, os.path.join(out, "reliability_digits.png"), title="digits, every guide")

    _say("2/3 two-moons MLP 2-16-16-2: mean-field SVI, then NUTS from it", progress)
    moons = zoo.get("mlp", data="two_moons", hidden=(16, 16), data_kwargs={"n": 2000, "noise": 0.1})
    svi = inference.fit(moons.model, inference.mean_field(moons.model), moons.train, steps=settings["moons_steps"],
                        batch_size=128, kl_warmup=settings["moons_steps"] // 5, seed=seed, progress=progress,
                        config={"entry": moons.config})
    mcmc = inference.nuts(moons.model, moons.train, init=svi, num_chains=2, num_warmup=settings["warmup"],
                          num_samples=settings["samples"], seed=seed, progress=progress,
                          config={"entry": moons.config})
    rows.append(_row("two_moons", "mean_field", svi, moons, settings["draws"], seed))
    rows.append(_row("two_moons", "nuts", mcmc, moons, settings["draws"], seed))
    probe = moons.test.x[:20]
    rhat = diagnostics.max_rhat(mcmc, probe)
    rows[-1].update({"divergences": mcmc.info["divergences"], "rhat_max_predictive": rhat,
                     "seconds": mcmc.info["nuts_s"]})
    inference.save(svi, os.path.join(out, "posteriors", "moons_mean_field"))
    inference.save(mcmc, os.path.join(out, "posteriors", "moons_nuts"))

    idata = {"mean_field": inference.to_arviz(svi, moons.test, num_samples=settings["samples"] * 2, seed=seed),
             "nuts": inference.to_arviz(mcmc, moons.test, seed=seed)}
    comparison = az.compare(idata)
    comparison.to_csv(os.path.join(out, "az_compare_moons.csv"))
    summary = diagnostics.predictive_summary(mcmc, probe)
    summary.to_csv(os.path.join(out, "az_summary_moons_predictive.csv"))
    weight_summary = az.summary(idata["nuts"], var_names=["mlp/~/linear_2/b"], round_to=4)
    weight_summary.to_csv(os.path.join(out, "az_summary_moons_weights.csv"))
    plots.reliability_diagram({"mean field": svi.predict(moons.test.x, settings["draws"]).mean(0),
                               "NUTS": mcmc.predict(moons.test.x, settings["draws"]).mean(0)},
                              moons.test.y, os.path.join(out, "reliability_moons.png"), title="two moons")
    plots.predictive_map({"mean-field SVI": lambda g: svi.predict(g, settings["draws"]).mean(0),
                          "NUTS": lambda g: mcmc.predict(g, settings["draws"]).mean(0)},
                         moons.test.x, moons.test.y, os.path.join(out, "predictive_map_moons.png"))

    _say("3/3 digits-C: every digits posterior on 19 corruption types x 5 severities", progress)
    ood_results, ood_summary = digits_c(digits_posts, out, num_samples=settings["ood_draws"], seed=seed,
                                        verbose=False)

    table = pd.DataFrame(rows).set_index(["data", "posterior"])
    table.to_csv(os.path.join(out, "results.csv"))
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump({"results": table.reset_index().to_dict(orient="records"), "settings": settings,
                   "seconds": time.perf_counter() - t_start}, f, indent=2, default=float)
    with open(os.path.join(out, "results.md"), "w") as f:
        f.write(table.to_markdown(floatfmt=".4f") if _has_tabulate() else table.to_string())
    print("\n" + table.to_string(float_format=lambda v: f"{v:.4f}"))
    print("\nArviZ compare (two moons, test-set log-likelihood):")
    print(comparison[["rank", "elpd_loo", "p_loo", "elpd_diff", "weight"]].to_string(float_format=lambda v: f"{v:.3f}"))
    print("\nFunction-space summary of NUTS, p(y=c|x) at 20 test points (first rows):")
    print(summary.head(6).to_string())
    print("\nDigits-C (19 types x 5 severities; mCE relative to point_estimate):")
    from evals import ood

    print(ood.format_table(ood_summary))
    print(f"\nmax R-hat of predictive probabilities: {rhat:.4f}; divergences: {mcmc.info['divergences']}")
    print(f"wrote {out}/ in {time.perf_counter() - t_start:.0f} s")
    return table


def digits_c(posteriors: dict, out: str | None, *, num_samples: int = 10, seed: int = 0, verbose: bool = True,
             types=None, severities=(1, 2, 3, 4, 5)):
    """Score digits posteriors {label: Posterior} on digits-C: raw [0, 1] test images corrupted with
    every type x severity, standardised as the training set was. Returns (OODResults, summary table)."""
    from evals import ood
    from zoo.data import digits as digits_data
    from zoo.data.embedded import digits_standardiser

    raw_train, raw_test = digits_data(standardise=False)
    mu, sd = digits_standardiser(raw_train.x)
    weights = {k: int(sum(np.size(v) for v in p.params.values())) for k, p in posteriors.items() if p.kind == "svi"}
    return ood.evaluate(posteriors, raw_test, out, reference="point_estimate", verbose=verbose,
                        types=types, severities=severities, image_shape=(8, 8, 1),
                        preprocess=lambda x: (x - mu) / sd, num_samples=num_samples, seed=seed,
                        num_params=weights)


def _row(data_name, label, posterior, entry, draws, seed):
    import evals

    row = evals.score(posterior, entry.test, num_samples=draws, seed=seed, verbose=False).iloc[0].to_dict()
    row.update({"data": data_name, "posterior": label, "weights": entry.num_weights()})
    if posterior.kind == "svi":
        row["seconds"] = posterior.info["fit_s"]
        row["guide_params"] = int(sum(np.size(v) for v in posterior.params.values()))
    return row


def _has_tabulate():
    try:
        import tabulate  # noqa: F401
        return True
    except ImportError:
        return False


def _say(msg, enabled):
    if enabled:
        print(f"[zoo run] {msg}", flush=True)
