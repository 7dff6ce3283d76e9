"""`zoo benchmark uci`: the UCI regression benchmark, every guide against NUTS of the identical model.

Per data set (a folder of the standard layout, `zoo.data.uci`) and split K, the catalogue's ``mlp`` with
`Settings.hidden_layers` hidden layers of 50 ReLU units and a learned homoscedastic noise (``noise=None``: the
site ``likelihood/noise`` under the prior `Settings.noise_prior`, sigma^2 ~ InverseGamma(1, 0.1), on the sd of the
standardised target) is fitted by each method of `METHODS`:

  map              the point estimate (``inference.point_estimate.point_estimate``; seed 0)
  mean_field       ``inference.mean_field``
  full_covariance  ``inference.joint_gaussian.full_covariance`` (one Gaussian over all weights)
  low_rank         ``inference.joint_gaussian.low_rank`` (rank `Settings.low_rank`)
  k_tied           ``inference.k_tied.k_tied`` (k = 2)
  mc_dropout       ``inference.dropout.binary_dropout`` on every weight matrix (rate `Settings.dropout_rate`)
  ensemble         `Settings.ensemble_size` point estimates (seeds 0, 1, ...; seed 0 is the ``map`` row's fit),
                   the predictive an equal mixture of their Normals
  nuts             ``inference.nuts``, `Settings.nuts_chains` chains, each started from its own draw of the
                   mean-field posterior

Every method is scored on the split's test rows in the target's original units (`zoo.data.uci.original_units`):
``test_ll`` = mean over test points of log (1/S) sum_s N(y | f_s(x), sigma_s) - log sd_y, ``rmse`` of the
predictive mean. NUTS converges when, on the predictive means f(x) at the test inputs (weights are not
identified: hidden units can swap), R-hat <= `RHAT_MAX` and bulk ESS >= `ESS_MIN` (``converged``); a split whose
NUTS misses it is flagged and left out of every average against NUTS, never silently averaged in.

Against NUTS on the same split (function space, test inputs): ``ll_gap`` = test_ll - test_ll(nuts);
``mean_abs_z`` = mean over test points of |mu - mu_nuts| / sd_nuts; ``sd_ratio`` = geometric mean over test
points of sd / sd_nuts, where mu and sd are the mean and sd over draws of f(x) (the network's output, without
the noise). On the first `Settings.compare_splits` splits, `evals.comparison.compare` puts mean field, full
covariance and NUTS side by side in weight space, and `chain_agreement` says which NUTS chains sample one mode.
"""

from __future__ import annotations

import json
import time
import warnings
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd
from inference.run_info import NutsInfo

METHODS = ("map", "mean_field", "full_covariance", "low_rank", "k_tied", "mc_dropout", "ensemble", "nuts")
"""Every method the benchmark fits, in the order it fits them (nuts starts from mean field's posterior)."""
RHAT_MAX = 1.01
ESS_MIN = 400.0
WIDTH = 50
"""Hidden units per layer (the published protocol: one layer of 50 ReLU units)."""


@dataclass(frozen=True)
class Settings:
    """What one benchmark run does; `QUICK` and `FULL` are the two presets.

    splits: the first K splits of every data set (None: all of them). hidden_layers: 1 or 2 (layers of `WIDTH`).
    svi_steps, batch_size: every SVI fit (Adam, the rate cosine-decayed from 1e-2 to 1e-4, `inference.fit`'s
    default); full_cov_steps: the full-covariance fit's steps (its update costs O(D^2)). num_samples: predictive
    draws of an SVI posterior. nuts_chains, nuts_warmup, nuts_draws (per chain), max_tree_depth: NUTS.
    prior, prior_scale: the weight prior (`zoo.entries`' kinds; "fan_in" 1: Normal(0, 1 / sqrt(fan_in)) on
    weights, Normal(0, 1) on biases). noise_prior, noise_prior_scale: the prior of the noise sd of the
    standardised target (`models.likelihoods.noise_prior`): sigma^2 ~ InverseGamma(1, 0.1) by default (the
    precision ~ Exponential(rate 0.1): docs/uci.md says why), or "half_normal" (HalfNormal(scale) on sigma). dropout_rate, ensemble_size, low_rank: the methods' own
    settings. compare_splits: how many of the
    first splits get the weight-space comparison.
    """

    splits: int | None = None
    hidden_layers: int = 1
    svi_steps: int = 5000
    full_cov_steps: int = 3000
    batch_size: int = 128
    num_samples: int = 500
    nuts_chains: int = 4
    nuts_warmup: int = 500
    nuts_draws: int = 500
    max_tree_depth: int = 10
    prior: str = "fan_in"
    prior_scale: float = 1.0
    noise_prior: str = "inverse_gamma"
    noise_prior_scale: float = 0.1
    dropout_rate: float = 0.05
    ensemble_size: int = 5
    low_rank: int = 10
    compare_splits: int = 1


FULL = Settings()
QUICK = replace(FULL, splits=3, svi_steps=1500, full_cov_steps=1000, num_samples=300, nuts_warmup=150,
                nuts_draws=100, max_tree_depth=6)


@dataclass
class Fitted:
    """One method's predictions on a split's test inputs: f (S, N) draws of the network output and ll (S, N)
    per-draw log N(y_n | f_s(x_n), sigma_s), both in standardised units (NUTS: S = C * D draws, chain major);
    seconds: the fit's wall time (NUTS: without the mean-field fit it starts from); posterior: the Posterior
    (None for the ensemble); stats: NUTS's extra columns; sigma (S,): each draw's noise sd (standardised; None:
    not known), with f the draws' predictive mixture sum_s N(f_s, sigma_s) / S."""

    f: np.ndarray
    ll: np.ndarray
    seconds: float
    posterior: object = None
    stats: dict | None = None
    sigma: np.ndarray | None = None


def entry_for(name: str, split: int, root, settings: Settings):
    """The catalogue entry ``mlp`` on split `split` of UCI set `name` (under `root`, None: the shipped sets),
    its learned noise under `Settings.noise_prior` (the same model for every method)."""
    from dataclasses import replace as replace_fields

    import models
    import zoo
    from models.likelihoods import normal

    entry = zoo.get("mlp", data=("uci", {"name": name, "split": int(split), "root": root}),
                    hidden=(WIDTH,) * settings.hidden_layers, noise=None, prior=settings.prior,
                    prior_scale=settings.prior_scale, noise_prior_scale=settings.noise_prior_scale)
    if settings.noise_prior == "half_normal":
        return entry
    likelihood = normal(None, settings.noise_prior_scale, settings.noise_prior)
    model = models.bnn(entry.model.network_fn, entry.model.prior, likelihood, name=entry.model.name,
                       feature_shape=entry.model.feature_shape)
    return replace_fields(entry, model=model)


def predictions(posterior, test, num_samples: int, seed: int = 1):
    """(f (S, N), ll (S, N), sigma (S,) or None) of `posterior` on `test`, all from one set of S weight draws;
    sigma: the draws' noise sd (the site ``likelihood/noise``; None for a model with a fixed noise)."""
    draws = posterior.draws(num_samples, seed=seed)
    f = posterior.predict(test.x, num_samples=num_samples, draws=draws)
    ll = posterior.log_likelihood(test.x, test.y, num_samples=num_samples, draws=draws)
    noise = draws.get("likelihood/noise")
    sigma = None if noise is None else np.asarray(noise, np.float64).reshape(-1)
    return np.asarray(f, np.float64).reshape(f.shape[0], -1), np.asarray(ll, np.float64), sigma


def guide_for(method: str, model, settings: Settings):
    """The guide of SVI method `method` for `model`."""
    import inference
    from inference.dropout import binary_dropout

    if method in ("map", "ensemble"):
        return inference.point_estimate.point_estimate(model)
    if method == "mc_dropout":
        return binary_dropout(model, dropout_sites=["*/w"], rate=settings.dropout_rate)
    if method == "low_rank":
        return inference.joint_gaussian.low_rank(model, rank=settings.low_rank)
    if method == "k_tied":
        return inference.k_tied.k_tied(model, k=2)
    return inference.make_guide(method, model)


def fit_svi(method: str, entry, settings: Settings, seed: int = 0) -> Fitted:
    """SVI fit of `method` on the entry's training split, scored on its test split."""
    import inference

    steps = settings.full_cov_steps if method == "full_covariance" else settings.svi_steps
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", inference.ConvergenceWarning)
        post = inference.fit(entry.model, guide_for(method, entry.model, settings), entry.train, steps=steps,
                             batch_size=settings.batch_size, seed=seed, progress=False)
    seconds = time.perf_counter() - t0
    num = 1 if method in ("map", "ensemble") else settings.num_samples
    f, ll, sigma = predictions(post, entry.test, num)
    return Fitted(f, ll, seconds, posterior=post, sigma=sigma)


def fit_ensemble(entry, settings: Settings, first: Fitted) -> Fitted:
    """`Settings.ensemble_size` point estimates, seeds 0, 1, ... (`first` is seed 0's): their draws stacked."""
    members = [first] + [fit_svi("ensemble", entry, settings, seed) for seed in range(1, settings.ensemble_size)]
    sigma = None if any(m.sigma is None for m in members) else np.concatenate([m.sigma for m in members])
    return Fitted(np.concatenate([m.f for m in members]), np.concatenate([m.ll for m in members]),
                  sum(m.seconds for m in members), sigma=sigma)


def fit_nuts(entry, settings: Settings, init, seed: int = 0) -> Fitted:
    """NUTS from `init` (an SVI Posterior: one draw per chain); convergence judged on f at the test inputs."""
    import inference
    from inference.diagnostics import ess_rhat

    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", inference.DivergenceWarning)
        post = inference.nuts(entry.model, entry.train, init=init, num_chains=settings.nuts_chains,
                              num_warmup=settings.nuts_warmup, draws_per_chain=settings.nuts_draws, seed=seed,
                              max_tree_depth=settings.max_tree_depth, progress=False)
    seconds = time.perf_counter() - t0
    total = settings.nuts_chains * settings.nuts_draws
    f, ll, sigma = predictions(post, entry.test, total)
    diag = ess_rhat(f.reshape(settings.nuts_chains, settings.nuts_draws, -1))
    info = post.info
    assert isinstance(info, NutsInfo)  # nuts records one
    stats = {"divergences": info.divergences, "max_rhat": diag["rhat_max"], "min_ess": diag["ess_bulk_min"],
             "leapfrog": info.mean_leapfrog_steps,
             "converged": bool(diag["rhat_max"] <= RHAT_MAX and diag["ess_bulk_min"] >= ESS_MIN)}
    return Fitted(f, ll, seconds, posterior=post, stats=stats, sigma=sigma)


def scores(fitted: Fitted, y_test: np.ndarray, y_sd: float) -> dict:
    """{test_ll, rmse} in original units (`zoo.data.uci.original_units`) of `fitted`'s draws on the standardised
    test targets y_test (N,): test_ll = mean_n log (1/S) sum_s p(y_n | w_s) - log sd_y; rmse of mean_s f_s."""
    from scipy.special import logsumexp

    from zoo.data.uci import original_units

    lppd = logsumexp(fitted.ll, axis=0) - np.log(fitted.ll.shape[0])  # (N,) log mean_s p(y_n | w_s)
    rmse = np.sqrt(np.mean((fitted.f.mean(0) - np.asarray(y_test, np.float64)) ** 2))
    test_ll, rmse = original_units(lppd.mean(), rmse, y_sd)
    return {"test_ll": test_ll, "rmse": rmse}


def against_nuts(fitted: Fitted, nuts: Fitted, y_sd: float = 1.0) -> dict:
    """{mean_abs_z, sd_ratio, w2}: mean |mu - mu_nuts| / sd_nuts and the geometric mean of sd / sd_nuts over the
    test inputs, mu and sd the mean and sd over draws of f (the network output); w2: the mean over test inputs of
    the 2-Wasserstein distance between the two predictive mixtures of the target (`uci_w2.w2_per_point`, the
    noise included), times `y_sd` (original units; NaN when a noise sd is unknown)."""
    from zoo.experiments.benchmarks.uci_w2 import w2_per_point

    mu, sd = fitted.f.mean(0), fitted.f.std(0)
    mu_n, sd_n = nuts.f.mean(0), nuts.f.std(0)
    with np.errstate(divide="ignore"):
        ratio = float(np.exp(np.mean(np.log(sd / sd_n))))
    w2 = np.nan
    if fitted.sigma is not None and nuts.sigma is not None:
        w2 = float(np.mean(w2_per_point(fitted.f, fitted.sigma, nuts.f, nuts.sigma)) * y_sd)
    return {"mean_abs_z": float(np.mean(np.abs(mu - mu_n) / sd_n)), "sd_ratio": ratio, "w2": w2}


def chain_agreement(posterior, threshold: float = 1.05) -> pd.DataFrame:
    """Which NUTS chains sample the same mode in weight space: per pair of chains (i, j), the fraction of weights
    whose two-chain rank-normalised split R-hat (ArviZ) is <= `threshold`; hidden units that swapped between the
    chains (another mode of the same function) make most of a pair's weights disagree."""
    import arviz as az

    from evals.comparison import flat_draws

    flat = flat_draws({k: np.asarray(v) for k, v in posterior.samples.items() if k != "likelihood/noise"})
    rows = []
    for i in range(flat.shape[0]):
        for j in range(i + 1, flat.shape[0]):
            rhat = az.rhat(az.convert_to_dataset({"w": flat[[i, j]]}))["w"].values
            rows.append({"pair": f"{i}-{j}", "agree_fraction": float(np.mean(rhat <= threshold))})
    return pd.DataFrame(rows)


def one_chain(posterior, chain: int = 0):
    """The MCMC Posterior of chain `chain` of `posterior` alone (one mode of the weights)."""
    from dataclasses import replace as replace_fields

    return replace_fields(posterior, samples={k: np.asarray(v)[chain:chain + 1] for k, v in posterior.samples.items()},
                          sample_stats=None)


def weight_space(mf, fc, nuts) -> list:
    """Rows {pair, metric, value} of `evals.comparison.compare` over all weights ("all" scope; the noise site left
    out) for mean field and full covariance against NUTS's chain 0 alone (one mode: the chains start from
    draws of the mean-field posterior, and `chain_agreement` shows they do not share one) and against all its
    chains pooled, and mean field against full covariance (a, b: the pair's two posteriors)."""
    from evals.comparison import compare

    chain0 = one_chain(nuts)
    rows = []
    for pair, a, b in (("mean_field-nuts[chain 0]", mf, chain0), ("full_covariance-nuts[chain 0]", fc, chain0),
                       ("mean_field-nuts[all chains]", mf, nuts), ("full_covariance-nuts[all chains]", fc, nuts),
                       ("mean_field-full_covariance", mf, fc)):
        sites = [s for s in a.site_names if s != "likelihood/noise"]
        table = compare(a, b, sites=sites, num_samples=1000, max_dim=1000)
        scope = "all" if len(sites) > 1 else sites[0]
        for _, r in table[table.scope == scope].iterrows():
            rows.append({"pair": pair, "metric": f"{r.metric}[{r.posterior}]", "value": float(r.value)})
    return rows


def run_split(name: str, split: int, root, settings: Settings, methods, log=print, starting=None):
    """(rows, weight rows, agreement rows) of every method in `methods` on one split; `log` gets a line per fit,
    ``starting(method)`` (if given) is called before each fit (the progress line's "now")."""
    entry = entry_for(name, split, root, settings)
    y_sd = entry.train.y_sd
    fitted: dict[str, Fitted] = {}
    need = set(methods)
    if "nuts" in need:
        need.add("mean_field")  # NUTS starts from it
    if "ensemble" in need:
        need.add("map")  # the ensemble's first member
    for method in METHODS:
        if method not in need:
            continue
        if starting is not None:
            starting(method)
        if method == "ensemble":
            fitted[method] = fit_ensemble(entry, settings, fitted["map"])
        elif method == "nuts":
            fitted[method] = fit_nuts(entry, settings, fitted["mean_field"].posterior)
        else:
            fitted[method] = fit_svi(method, entry, settings)
        row = scores(fitted[method], entry.test.y, y_sd)
        stats = fitted[method].stats
        extra = "" if stats is None else (
            f", R-hat {stats['max_rhat']:.3f}, ESS {stats['min_ess']:.0f}, {stats['leapfrog']:.0f} leapfrog steps")
        log(f"  {name} split {split} L={settings.hidden_layers} {method:<16} test LL {row['test_ll']:8.3f}  "
            f"RMSE {row['rmse']:8.3f}  {fitted[method].seconds:6.1f} s{extra}")
    rows = []
    for method in methods:
        fit = fitted[method]
        row = {"dataset": name, "split": int(split), "hidden_layers": settings.hidden_layers, "method": method,
               **scores(fit, entry.test.y, y_sd), "seconds": fit.seconds}
        row.update({"divergences": np.nan, "max_rhat": np.nan, "min_ess": np.nan, "nuts_converged": np.nan,
                    "ll_gap": np.nan, "rmse_gap": np.nan, "mean_abs_z": np.nan, "sd_ratio": np.nan,
                    "w2": np.nan})
        if "nuts" in fitted:
            nuts = fitted["nuts"]
            assert nuts.stats is not None  # fit_nuts records them
            row["nuts_converged"] = nuts.stats["converged"]
            nuts_scores = scores(nuts, entry.test.y, y_sd)
            row["ll_gap"] = row["test_ll"] - nuts_scores["test_ll"]
            row["rmse_gap"] = row["rmse"] - nuts_scores["rmse"]
            row.update(against_nuts(fit, nuts, y_sd))
        if method == "nuts":
            assert fit.stats is not None
            row.update({k: fit.stats[k] for k in ("divergences", "max_rhat", "min_ess")})
        rows.append(row)
    weights, agreement = [], []
    if split < settings.compare_splits and {"mean_field", "full_covariance", "nuts"} <= set(fitted):
        base = {"dataset": name, "split": int(split), "hidden_layers": settings.hidden_layers}
        weights = [base | r for r in weight_space(fitted["mean_field"].posterior,
                                                  fitted["full_covariance"].posterior, fitted["nuts"].posterior)]
        agreement = [base | r for r in chain_agreement(fitted["nuts"].posterior).to_dict("records")]
    return rows, weights, agreement


def run(out_dir, settings: Settings, datasets=None, methods=METHODS, root=None, hidden_layers=(1,),
        log=print, resume: bool = False) -> pd.DataFrame:
    """Run the benchmark and write ``uci.csv``, ``weights.csv``, ``chains.csv``, ``summary.md`` and ``uci.png``
    into `out_dir`; returns the per-(depth, data set, split, method) table.

    datasets: folder names under `root` (None: the shipped sets; every set `zoo.data.uci.available` lists);
    methods: a subset of `METHODS`; hidden_layers: the depths to run (1 and/or 2; both: the depth verdict).
    The splits run split-major (split 0 of every set, then split 1, ...) and the CSVs are rewritten after every
    split (a long run can be read while it goes, and a stopped one covers every set evenly). resume: keep the finished
    splits of the earlier run in `out_dir` (`uci_folder.finished_rows`) and fit only the others; the folder
    must be absent, empty or this benchmark's (`uci_folder.check_out`; `main` checks it before any work).
    """
    from zoo.experiments.benchmarks.uci_folder import check_out, finished_rows, marker
    from zoo.experiments.benchmarks.uci_report import write_report
    from zoo.data.uci import available, num_splits
    from zoo.progress_line import ProgressLine

    out = Path(out_dir)
    found = check_out(out)
    out.mkdir(parents=True, exist_ok=True)
    datasets = list(datasets) if datasets else available(root)
    before: list = [pd.DataFrame()] * 3
    done: set = set()
    earlier_s, pieces = 0.0, 1
    if resume and found is not None:
        *before, done = finished_rows(out, methods)
        earlier_s, pieces = float(found.get("seconds") or 0.0), int(found.get("pieces") or 1) + 1
    settings_d = settings_dict(settings)
    (out / "run.json").write_text(json.dumps(marker(settings_d, methods, earlier_s, pieces)))
    t0 = time.perf_counter()
    rows, weights, agreement = (frame.to_dict("records") for frame in before)
    counts = {name: min(num_splits(name, root), settings.splits or num_splits(name, root)) for name in datasets}
    # split-major: split 0 of every set, then split 1, ...: a run stopped part-way covers every set evenly
    plan = [(depth, name, k) for depth in hidden_layers for k in range(max(counts.values(), default=0))
            for name in datasets if k < counts[name]]
    todo = [item for item in plan if item not in done]
    if done:
        log(f"resuming {out}: {len(plan) - len(todo)} of {len(plan)} splits already finished")
    # one progress line, a part per split (zoo.progress_line): rewritten on a terminal, plain lines elsewhere
    line = ProgressLine(max(1, len(todo)), log=None if log is print else log)
    for i, (depth, name, k) in enumerate(todo):
        where = f"{name} split {k}, {depth} hidden layer(s)"
        line.update(i, where)
        r, w, a = run_split(name, k, root, replace(settings, hidden_layers=depth), methods, line.log,
                            starting=lambda method, i=i, where=where: line.update(i, f"{method} on {where}"))
        rows += r
        weights += w
        agreement += a
        pd.DataFrame(rows).to_csv(out / "uci.csv", index=False)
        pd.DataFrame(weights).to_csv(out / "weights.csv", index=False)
        pd.DataFrame(agreement).to_csv(out / "chains.csv", index=False)
        (out / "run.json").write_text(json.dumps(marker(settings_d, methods, earlier_s + time.perf_counter() - t0,
                                                        pieces)))  # the seconds of the finished splits
    if todo:
        line.close()
    seconds = earlier_s + time.perf_counter() - t0
    table = pd.DataFrame(rows)
    (out / "run.json").write_text(json.dumps(marker(settings_d, methods, seconds, pieces)))
    write_report(out, table, pd.DataFrame(weights), pd.DataFrame(agreement), settings_d, seconds)
    from zoo.report import write_report as write_page

    page = write_page(out)
    log(f"done in {seconds:.0f} s: {out / 'uci.csv'}, {out / 'summary.md'}, {out / 'uci.png'}; the report to read: "
        f"{page}")
    return table


def check_request(datasets, methods, root, splits=None, preset_splits=None) -> tuple:
    """(datasets, methods) checked before any work: every method one of `METHODS`, every data set named once
    and a folder of `root`, `splits` (the user's ``--splits``; None: the preset's `preset_splits`, at most the
    folder's, or every split) at most the splits of every set, and every split that will run loading (a missing
    or malformed file is refused here, naming it, not when its turn comes). InputError otherwise."""
    from base.errors import InputError
    from zoo.data.uci import available, dataset_dir, num_splits, uci_arrays

    methods = tuple(METHODS) if not methods else tuple(methods)
    unknown = [m for m in methods if m not in METHODS]
    if unknown:
        raise InputError("--methods", ",".join(unknown), f"methods among {','.join(METHODS)}", "unknown method")
    twice = sorted({m for m in methods if methods.count(m) > 1})
    if twice:
        raise InputError("--methods", ",".join(methods), "each method named once", f"{', '.join(twice)} repeated")
    names = list(datasets) if datasets else available(root)
    if not names:
        raise InputError("--data-dir", str(root), "a folder holding UCI data set folders (each with a data.txt)")
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise InputError("--datasets", ",".join(names), "each data set named once",
                         f"{', '.join(twice)} repeated (its rows would count twice in every average)")
    for name in names:
        try:
            dataset_dir(name, root)
        except InputError as err:
            if err.argument == "name":
                raise InputError("--datasets", name, f"data set folders among {available(root)}",
                                 "unknown data set") from None
            raise
        have = num_splits(name, root)
        for k in range(max(1, min(have, splits or preset_splits or have))):
            uci_arrays(name, k, root)  # split 0 even where the folder has none: it names the missing file
        if splits is not None and int(splits) > have:
            raise InputError("--splits", int(splits), f"at most {have}: {name} has {have} splits "
                             f"(index_train_0.txt ... index_train_{have - 1}.txt)")
    return names, methods


def main(*, data_dir=None, datasets=None, splits=None, methods=None, hidden_layers=(1,), out="zoo-results/uci",
         quick=False, resume=False, log=print) -> pd.DataFrame:
    """`zoo benchmark uci`: the `QUICK` or `FULL` settings (`splits` overrides their number of splits), checked
    arguments (`check_request`) and output folder (`uci_folder.check_out`, `uci_folder.check_resumable`: the
    library's own or new; an earlier run only with `resume`), all before any fit, then `run`."""
    from zoo.experiments.benchmarks.uci_folder import check_out, check_resumable

    settings = QUICK if quick else FULL
    if splits is not None:
        settings = replace(settings, splits=int(splits))
    found = check_out(out)
    names, methods = check_request(datasets, methods, data_dir, splits, settings.splits)
    check_resumable(found, resume, settings_dict(settings), methods, out)
    log(f"zoo benchmark uci: {', '.join(names)}; methods {', '.join(methods)}; hidden layers "
        f"{', '.join(map(str, hidden_layers))}; {'quick' if quick else 'full'} settings -> {out}")
    return run(out, settings, names, methods, data_dir, tuple(hidden_layers), log, resume=resume)


def settings_dict(settings: Settings) -> dict:
    """The settings as a plain dict (for the report)."""
    return asdict(settings)
