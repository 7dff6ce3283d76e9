"""Choose the default prior on a validation split, and check the families against the point estimate (issue 13).

Part 1, the grid: prior kind x prior scale x guide (mean field, 2-tied) x network (digits MLP 64-64, digits_28
MLP 784-400-400), each fitted with `inference.fit`'s defaults (Adam, rate cosine-decayed 1e-2 -> 1e-4 over the
steps; sigma init 0.01) and a KL warm-up over the first 20 % of the steps, on a seeded 80/20 split of the
entry's training set: validation accuracy / NLL / ECE, final loss, ``post.info.converged``, the median
posterior sigma (mean field), steps and seconds. The default (prior kind, scale) is the one with the lowest
validation NLL averaged over the four (network, guide) cells; the test set is never read in part 1.

Part 2, must-hold 5: the chosen prior on digits_28 784-400-400, fitted on the whole training set: mean field,
2-tied and the point estimate (same prior: MAP), test accuracy / NLL / ECE and the corruption suite (19 types
x 5 severities of the raw 28 x 28 test images, standardised as the training set was: cNLL / cA / cECE).

    python benchmarks/prior_grid.py            # the README's tables (about 25 minutes on 2 CPU cores)
    python benchmarks/prior_grid.py --quick    # a smoke run: tiny grid, few steps
    python benchmarks/prior_grid.py --rule 0=a/extra/grid.csv 1=b/extra/grid.csv   # the rule over earlier runs

Writes ``<out>/grid.csv``, ``<out>/must_hold_5.csv`` and ``<out>/prior_grid.md`` and prints the tables.
"""

from __future__ import annotations

import argparse
import os
import time
import warnings

import numpy as np
import pandas as pd

NETWORKS = {"64-64": ("digits", (64, 64)), "784-400-400": ("digits_28", (400, 400))}
PRIORS = (("normal", 0.1), ("normal", 1.0), ("fan_in", 0.5), ("fan_in", 1.0), ("fan_in", 2.0))


def large_candidates(small: pd.DataFrame):
    """The 784-400-400 net costs ~0.05 s a step on 2 CPU cores, so it sees fewer settings: the old default
    (normal, 1) and the best of the 64-64 grid by validation NLL (the second best if that is (normal, 1))."""
    ranked = [(p, float(s)) for p, s in choose(small)[1][["prior", "scale"]].itertuples(index=False)]
    return [("normal", 1.0)] + [c for c in ranked if c != ("normal", 1.0)][:1]
GUIDES = ("mean_field", "2-tied")


def split(data, fraction: float = 0.2, seed: int = 0):
    """((x_train, y_train), (x_val, y_val)): a seeded random `fraction` of `data` (x (N, ...), y (N,)) held out."""
    x, y = np.asarray(data.x), np.asarray(data.y)
    order = np.random.default_rng(seed).permutation(len(x))
    n_val = int(round(fraction * len(x)))
    val, train = order[:n_val], order[n_val:]
    return (x[train], y[train]), (x[val], y[val])


def make_guide(name: str, model):
    """The guide `name` ("mean_field", "2-tied", "point_estimate") for `model`, at the library's defaults;
    "mean_field@old": mean field at the old sigma init 1e-3."""
    import inference

    if name == "2-tied":
        return inference.k_tied.k_tied(model, k=2)
    if name == "mean_field@old":
        return inference.mean_field(model, init_scale=1e-3)
    return getattr(inference, name)(model)


def parse_setting(text: str):
    """"KIND:SCALE" -> (kind, scale): SCALE a number, or PATTERN=SCALE pairs separated by commas (as
    ``zoo fit --prior-scale``), e.g. "fan_in:*linear_0/*=8,*=4" -> ("fan_in", {"*linear_0/*": 8.0, "*": 4.0})."""
    from zoo.cli import _prior_scale

    kind, _, scale = text.partition(":")
    return kind, _prior_scale(scale)


def label(scale) -> float | str:
    """A prior scale as a table cell: the number, or "PATTERN=SCALE,..." for a per-site scale."""
    if isinstance(scale, dict):
        return ",".join(f"{p}={v:g}" for p, v in scale.items())
    return float(scale)


def fit_and_score(network, prior, scale, guide_name, train, evaluate, *, steps, seed, draws, temperature=1.0):
    """Fit one cell and score it on `evaluate` ((x, y)): a dict row (metrics, loss, convergence, sigma, seconds)
    and the Posterior. scale: a number or {site pattern: number} (`models.priors.per_site`); temperature: the
    likelihood temperature of `inference.fit` (1: the Bayesian posterior; only as a diagnostic, never chosen)."""
    import evals
    import inference
    import optax
    import zoo

    data_name, hidden = NETWORKS[network]
    entry = zoo.get("mlp", data=data_name, hidden=hidden, prior=prior, prior_scale=scale)
    guide = make_guide(guide_name, entry.model)
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        post = inference.fit(entry.model, guide, train, steps=steps, kl_warmup=int(0.2 * steps), seed=seed,
                             progress=False, temperature=temperature,
                             optimizer=optax.adam(1e-3) if guide_name.endswith("@old") else None)
    seconds = time.perf_counter() - t0
    row = evals.score(post, evaluate, num_samples=draws, seed=seed, verbose=False).iloc[0].to_dict()
    mean_field = guide_name.startswith("mean_field")
    scales = [np.ravel(v) for k, v in post.params.items() if k.endswith("_scale")] if mean_field else []
    row.update({"network": network, "prior": prior, "scale": label(scale), "guide": guide_name,
                "temperature": temperature,
                "final_loss": float(np.mean(post.losses[-max(1, steps // 50):])),
                "converged": bool(post.info.converged), "steps": steps, "seconds": round(seconds, 1),
                "tail_change": (post.info.convergence or {}).get("rel_change"),
                "median_sigma": float(np.median(np.concatenate(scales))) if scales else np.nan})
    return row, post


def grid(networks, priors, guides, *, steps, seed, draws, out, temperature=1.0, split_seed=None):
    """Part 1: every cell on the validation split (`split` with `split_seed`, default `seed`; the fits use
    `seed`), appended to ``<out>/grid.csv`` as it finishes."""
    import zoo

    rows = []
    for network in networks:
        entry = zoo.get("mlp", data=NETWORKS[network][0], hidden=NETWORKS[network][1])
        train, val = split(entry.train, seed=seed if split_seed is None else split_seed)
        candidates = priors[network]
        if callable(candidates):
            candidates = candidates(pd.DataFrame(rows))
        for prior, scale in candidates:
            for guide_name in guides:
                row, _ = fit_and_score(network, prior, scale, guide_name, train, val, steps=steps[network],
                                       seed=seed, draws=draws, temperature=temperature)
                rows.append(row)
                pd.DataFrame(rows).to_csv(os.path.join(out, "grid.csv"), index=False)
                print(_fmt(pd.DataFrame([row])[GRID_COLUMNS]), flush=True)
    return pd.DataFrame(rows)


GRID_COLUMNS = ["network", "guide", "prior", "scale", "accuracy", "nll", "ece", "final_loss", "converged",
                "tail_change", "median_sigma", "steps", "seconds"]


def choose(table: pd.DataFrame):
    """(prior, scale) with the lowest validation NLL averaged over the (network, guide) cells, and the ranking
    (a DataFrame of the mean NLL and accuracy per prior setting, best first); only settings scored in every cell
    compete."""
    groups = table.groupby(["prior", "scale"])
    cells = groups.size()
    ranking = groups[["nll", "accuracy", "ece"]].mean()[cells == cells.max()].sort_values("nll").reset_index()
    best = ranking.iloc[0]
    scale = best["scale"] if isinstance(best["scale"], str) else float(best["scale"])
    return (best["prior"], scale), ranking


def first_layer_sigmas(post, x_train, edges=(0.0, 0.05, 0.2, 0.5, np.inf)) -> pd.DataFrame:
    """Mean field's first-layer weights grouped by how much their input pixel varies in training.

    post: a mean-field Posterior of an MLP (params ``.../linear_0/w_auto_loc`` and ``..._scale``, (D, H));
    x_train: (N, D) the standardised training inputs. Pixels are binned by their training sd (`edges`, in
    standardised units); per bin: the pixel count, the median posterior sigma and median |mean| of their
    weights (a weight whose pixel never varies is pinned by the prior alone). Returns a DataFrame."""
    params = {k.rsplit("/", 2)[-2] + "/" + k.rsplit("/", 1)[-1]: np.asarray(v) for k, v in post.params.items()}
    sigma, mean = params["linear_0/w_auto_scale"], params["linear_0/w_auto_loc"]
    pixel_sd = np.asarray(x_train).std(axis=0)
    rows = []
    for lo, hi in zip(edges[:-1], edges[1:]):
        sel = (pixel_sd >= lo) & (pixel_sd < hi)
        rows.append({"pixel_sd": f"[{lo:g}, {hi:g})", "pixels": int(sel.sum()),
                     "median_sigma": float(np.median(sigma[sel])) if sel.any() else np.nan,
                     "median_abs_mean": float(np.median(np.abs(mean[sel]))) if sel.any() else np.nan})
    return pd.DataFrame(rows)


def rule_over_splits(table: pd.DataFrame):
    """The default-prior rule of `choose`, per split and over splits, from grid rows of several runs.

    table: grid rows (columns network, guide, prior, scale, nll, accuracy, ece) with a ``split`` column (the
    ``--split-seed`` of the run that wrote them). Per split: `choose`'s choice over every (network, guide)
    cell of that split, and each setting's mean validation NLL over all the split's cells, per guide family
    and per network. Over splits: each setting's per-split mean NLL, their mean and its standard error (ddof
    1) over the splits in which that view has as many cells as in its fullest split (a split with the 64-64
    cells only does not enter the "all cells" mean), among the settings in all of those splits. Returns
    (choices {split: (prior, scale)}, a long DataFrame of the per-split means (columns split, view, setting,
    nll, cells), the over-splits DataFrame (view, setting, a column per split, mean, se, splits))."""
    choices, rows = {}, []
    for s, part in table.groupby("split"):
        choices[s] = choose(part)[0]
        views = [("all cells", part)] + [(f"{column} {value}", sub) for column in ("guide", "network")
                                         for value, sub in part.groupby(column)]
        for view, sub in views:
            stats = sub.groupby(["prior", "scale"])["nll"].agg(["mean", "size"])
            for (prior, scale), (nll, cells) in stats.iterrows():
                rows.append({"split": s, "view": view, "setting": f"{prior} {scale}", "nll": nll, "cells": cells})
    per_split = pd.DataFrame(rows)
    full = per_split[per_split["cells"] == per_split.groupby("view")["cells"].transform("max")]
    wide = full.pivot_table(index=["view", "setting"], columns="split", values="nll")
    splits = wide.notna().sum(axis=1)
    wide = wide[splits == splits.groupby(level="view").transform("max")]
    count = wide.notna().sum(axis=1)
    over = pd.DataFrame({"mean": wide.mean(axis=1), "se": wide.std(axis=1, ddof=1) / np.sqrt(count),
                         "splits": count})
    return choices, per_split, pd.concat([wide, over], axis=1).reset_index()


def read_runs(specs) -> pd.DataFrame:
    """"SPLIT=CSV" strings (a grid CSV written by a ``--split-seed SPLIT`` run) -> their rows stacked with a
    ``split`` column; a spec without "=" is refused (ValueError naming it)."""
    tables = []
    for spec in specs:
        split_seed, sep, path = spec.partition("=")
        if not sep or not split_seed.strip().lstrip("-").isdigit():
            raise ValueError(f"--rule: {spec!r}; expected SPLIT=CSV, e.g. 0=benchmarks/results/s0/extra/grid.csv")
        tables.append(pd.read_csv(path).assign(split=int(split_seed)))
    return pd.concat(tables, ignore_index=True)


PART2_GUIDES = ("point_estimate", "mean_field", "2-tied")


def site_sigmas(post) -> pd.DataFrame:
    """Per weight site of a mean-field Posterior: the median posterior sigma and median |mean| (a site whose
    sigma sits at the prior's sd and whose means are small against it carries no information from the data)."""
    rows = []
    for name, value in post.params.items():
        if name.endswith("_auto_scale"):
            site = name[: -len("_auto_scale")]
            rows.append({"site": site, "size": int(np.size(value)), "median_sigma": float(np.median(value)),
                         "median_abs_mean": float(np.median(np.abs(post.params[site + "_auto_loc"])))})
    return pd.DataFrame(rows)


def must_hold_5(prior, scale, *, steps, seed, draws, ood_draws, severities, types, out, guides=PART2_GUIDES):
    """Part 2: mean field, 2-tied and the point estimate on digits_28 784-400-400 (whole training set), the
    test set clean and corrupted. steps: an int, or {guide: steps}; guides: a subset of `PART2_GUIDES` (mCE
    is NaN without the point estimate). Writes ``must_hold_5.csv``, the NLL and
    accuracy per corruption type (``corruption_types.csv``), mean field's `site_sigmas` (``sigma_by_site.csv``)
    and `first_layer_sigmas` (``sigma_by_pixel.csv``). Returns (summary DataFrame, one row per guide; per-type
    table; the two sigma tables stacked)."""
    import zoo
    from evals import ood
    from zoo.data.embedded import digits_28, digits_standardiser

    entry = zoo.get("mlp", data="digits_28", hidden=(400, 400), prior=prior, prior_scale=scale)
    posts, rows = {}, []
    for guide_name in guides:
        row, post = fit_and_score("784-400-400", prior, scale, guide_name, entry.train, entry.test, seed=seed,
                                  steps=steps.get(guide_name) if isinstance(steps, dict) else steps, draws=draws)
        posts[guide_name] = post
        rows.append(row)
        print(_fmt(pd.DataFrame([row])[GRID_COLUMNS]), flush=True)
    raw_train, raw_test = digits_28(standardise=False)
    mu, sd = digits_standardiser(raw_train.x)
    results = ood.score(posts, raw_test, types=types, severities=severities, image_shape=(28, 28, 1),
                        preprocess=lambda x: (x - mu) / sd, num_samples=ood_draws, seed=seed)
    corrupted = ood.aggregate(results.table, reference="point_estimate" if "point_estimate" in posts else None)
    table = pd.DataFrame(rows).set_index("guide")
    for col in ("cnll", "caccuracy", "cece", "mce"):
        table[col] = corrupted[col]
    table = table.reset_index()
    table.to_csv(os.path.join(out, "must_hold_5.csv"), index=False)
    corrupted_rows = results.table[results.table["type"] != "clean"]
    per_type = corrupted_rows.pivot_table(index="type", columns="method", values=["nll", "accuracy"],
                                          aggfunc="mean")
    per_type.columns = [f"{metric}_{method}" for metric, method in per_type.columns]
    per_type = per_type.reset_index()
    per_type.to_csv(os.path.join(out, "corruption_types.csv"), index=False)
    if "mean_field" not in posts:
        return table, per_type, pd.DataFrame()
    sigmas = first_layer_sigmas(posts["mean_field"], entry.train.x)
    sigmas.to_csv(os.path.join(out, "sigma_by_pixel.csv"), index=False)
    sites = site_sigmas(posts["mean_field"])
    sites.to_csv(os.path.join(out, "sigma_by_site.csv"), index=False)
    return table, per_type, pd.concat([sites, sigmas], ignore_index=True)


MUST_COLUMNS = ["guide", "accuracy", "nll", "ece", "cnll", "caccuracy", "cece", "mce", "final_loss", "converged",
                "tail_change", "median_sigma", "steps", "seconds"]


def _fmt(table: pd.DataFrame) -> str:
    return table.to_string(index=False, float_format=lambda v: f"{v:.4g}")


def _markdown(table: pd.DataFrame) -> str:
    try:
        return table.to_markdown(index=False, floatfmt=".4g")
    except ImportError:
        return _fmt(table)


def main(argv=None):
    """Parse the arguments, run both parts, write the CSVs and the Markdown report, print the tables."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run: 2 priors, the 64-64 net, 200 steps")
    parser.add_argument("--out", default=os.path.join("benchmarks", "results", "prior_grid"))
    parser.add_argument("--seed", type=int, default=0, help="the fits' seed (and the split's, unless --split-seed)")
    parser.add_argument("--split-seed", type=int, help="part 1: the 80/20 validation split's seed (default --seed)")
    parser.add_argument("--steps-small", type=int, default=6000, help="steps on the 64-64 net")
    parser.add_argument("--steps-large", type=int, default=3000, help="steps on the 784-400-400 net")
    parser.add_argument("--steps-mean-field", type=int, help="part 2: mean field's steps (default --steps-large)")
    parser.add_argument("--steps-tied", type=int, help="part 2: 2-tied's steps (default --steps-large)")
    parser.add_argument("--part2-guides", nargs="+", choices=PART2_GUIDES, default=PART2_GUIDES,
                        help="part 2: fit only these guides")
    parser.add_argument("--draws", type=int, default=30, help="posterior draws for the validation/test metrics")
    parser.add_argument("--ood-draws", type=int, default=10, help="posterior draws per corrupted set")
    parser.add_argument("--skip-grid", nargs=2, metavar=("PRIOR", "SCALE"),
                        help="skip part 1 and run part 2 with this prior (SCALE: a number or PATTERN=SCALE,...)")
    parser.add_argument("--networks", nargs="+", choices=list(NETWORKS), help="part 1 only, on these networks")
    parser.add_argument("--priors", nargs="+", metavar="KIND:SCALE",
                        help="part 1 only, these settings (SCALE: a number or PATTERN=SCALE,..., e.g. "
                             "'fan_in:*linear_0/*=8,*=4')")
    parser.add_argument("--guides", nargs="+", choices=GUIDES, default=GUIDES, help="part 1 extra cells: these guides")
    parser.add_argument("--temperature", type=float, default=1.0,
                        help="part 1 extra cells only, a diagnostic: the likelihood temperature (1: Bayesian)")
    parser.add_argument("--old-defaults", action="store_true",
                        help="part 1 only: mean field at the old defaults (Adam 1e-3, sigma init 1e-3), prior normal 1")
    parser.add_argument("--rule", nargs="+", metavar="SPLIT=CSV",
                        help="fit nothing: apply the default-prior rule to grid CSVs of earlier runs (SPLIT: the "
                             "run's --split-seed), per split, per guide family, per network and over splits")
    args = parser.parse_args(argv)
    if args.rule:
        choices, per_split, over = rule_over_splits(read_runs(args.rule))
        print(_fmt(per_split.pivot_table(index=["view", "setting"], columns="split", values="nll").reset_index())
              + "\n\nover splits (per view, the splits that have all its cells):\n" + _fmt(over)
              + "\n\nchosen per split: " + str(choices))
        return choices
    if args.networks or args.priors or args.old_defaults:
        return extra_cells(args)
    os.makedirs(args.out, exist_ok=True)
    if args.quick:
        networks, steps = ["64-64"], {"64-64": 200, "784-400-400": 200}
        priors = {"64-64": [("normal", 1.0), ("fan_in", 1.0)]}
        severities, types = (1, 5), ["gaussian_noise", "shot_noise"]
    else:
        networks, priors = list(NETWORKS), {"64-64": PRIORS, "784-400-400": large_candidates}
        steps = {"64-64": args.steps_small, "784-400-400": args.steps_large}
        severities, types = (1, 2, 3, 4, 5), None
    report = []
    if args.skip_grid:
        choice = parse_setting(":".join(args.skip_grid))
    else:
        table = grid(networks, priors, GUIDES, steps=steps, seed=args.seed, draws=args.draws, out=args.out,
                     split_seed=args.split_seed)
        choice, ranking = choose(table)
        if isinstance(choice[1], str):  # a per-site scale's label
            choice = parse_setting(f"{choice[0]}:{choice[1]}")
        report += ["## Validation grid (80/20 split of the training set, seed %d)" % args.seed, "",
                   _markdown(table[GRID_COLUMNS]), "", "## Ranking (mean validation NLL over the cells)", "",
                   _markdown(ranking), "", f"Chosen: prior={choice[0]!r}, prior_scale={choice[1]}", ""]
        print("\n" + _fmt(ranking) + f"\nchosen: {choice}", flush=True)
    large = steps["784-400-400"]
    part2_steps = {"point_estimate": large, "2-tied": args.steps_tied or large,
                   "mean_field": args.steps_mean_field or large}
    must, per_type, sigmas = must_hold_5(*choice, steps=part2_steps, seed=args.seed, draws=args.draws,
                                         ood_draws=args.ood_draws, severities=severities, types=types, out=args.out,
                                         guides=args.part2_guides)
    report += [f"## Must-hold 5: digits_28 784-400-400, prior {choice[0]} {label(choice[1])}, test set", "",
               _markdown(must[MUST_COLUMNS]), "", "## Corrupted NLL and accuracy per type (mean over severities)",
               "", _markdown(per_type), "",
               "## Mean field's sigmas per site, and first-layer ones by their pixel's training sd", "",
               _markdown(sigmas), ""]
    print("\n" + _fmt(must[MUST_COLUMNS]) + "\n\n" + _fmt(per_type) + "\n\n" + _fmt(sigmas), flush=True)
    with open(os.path.join(args.out, "prior_grid.md"), "w") as f:
        f.write("\n".join(report))


def extra_cells(args):
    """Part 1 cells beyond the default grid (``--networks``, ``--priors``, ``--old-defaults``), written to
    ``<out>/extra.csv``; no choice, no part 2."""
    networks = args.networks or list(NETWORKS)
    if args.old_defaults:
        priors, guides = [("normal", 1.0)], ("mean_field@old",)
    else:
        priors, guides = [parse_setting(p) for p in args.priors or []], args.guides
    steps = {"64-64": args.steps_small, "784-400-400": args.steps_large}
    out = os.path.join(args.out, "extra")
    os.makedirs(out, exist_ok=True)
    table = grid(networks, {n: priors for n in networks}, guides, steps=steps, seed=args.seed, draws=args.draws,
                 out=out, temperature=args.temperature, split_seed=args.split_seed)
    print("\n" + _fmt(table[GRID_COLUMNS]) + "\n\nranking (mean validation NLL over these cells):\n"
          + _fmt(choose(table)[1]))
    return table


if __name__ == "__main__":
    main()
