"""`zoo run`: the main job, on embedded data only (no download).

1. Mean-field SVI on the digits MLP 64-64: scores, loss curve, reliability diagram.
2. Two-moons MLP 2-16-16-2: mean-field SVI, then NUTS on the same model object started from draws of
   the SVI posterior; scores, divergences, function-space R-hat, an ArviZ summary and `az.compare`.
Writes results.{csv,json,md}, plots and the posteriors under the output folder.
"""

from __future__ import annotations

import json
import os
import time

import numpy as np
import pandas as pd


def main_job(out: str = "zoo-results", *, quick: bool = False, seed: int = 0, progress: bool = True) -> pd.DataFrame:
    """Run the main job and write its outputs under `out`. Returns the results table.

    `quick` shrinks steps and draws (for smoke tests); the defaults are the documented run.
    """
    import arviz as az

    import evals
    import inference
    import zoo
    from evals import plots
    from inference import diagnostics

    os.makedirs(out, exist_ok=True)
    t_start = time.perf_counter()
    rows = []
    settings = {
        "digits_steps": 300 if quick else 3000,
        "moons_steps": 300 if quick else 3000,
        "warmup": 50 if quick else 400,
        "samples": 50 if quick else 400,
        "draws": 20 if quick else 200,
    }

    _say("1/2 digits MLP 64-64, mean-field SVI", progress)
    digits = zoo.get("mlp", data="digits", hidden=(64, 64))
    guide = inference.mean_field(digits.model)
    post = inference.fit(digits.model, guide, digits.train, steps=settings["digits_steps"], batch_size=128,
                         kl_warmup=settings["digits_steps"] // 5, seed=seed, progress=progress,
                         config={"entry": digits.config})
    rows.append(_row("digits", "mean_field", post, digits, settings["draws"], seed))
    inference.save(post, os.path.join(out, "posteriors", "digits_mean_field"))
    plots.loss_curve(post.losses, os.path.join(out, "loss_digits_mean_field.png"), "digits MLP, mean field")
    plots.reliability_diagram({"mean field": post.predict(digits.test.x, settings["draws"]).mean(0)},
                              digits.test.y, os.path.join(out, "reliability_digits.png"), title="digits MLP 64-64")

    _say("2/2 two-moons MLP 2-16-16-2: mean-field SVI, then NUTS from it", progress)
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
    print(f"\nmax R-hat of predictive probabilities: {rhat:.4f}; divergences: {mcmc.info['divergences']}")
    print(f"wrote {out}/ in {time.perf_counter() - t_start:.0f} s")
    return table


def _row(data_name, label, posterior, entry, draws, seed):
    import evals

    row = evals.score(posterior, entry.test, num_samples=draws, seed=seed, verbose=False).iloc[0].to_dict()
    row.update({"data": data_name, "posterior": label, "weights": entry.num_weights()})
    if posterior.kind == "svi":
        row["seconds"] = posterior.info["fit_s"]
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
