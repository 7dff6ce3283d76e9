"""`zoo benchmark images`: every posterior beside what a practitioner would pick instead, on real images.

Per network (``mlp``: 784-400-400-10 on flat rows; ``lenet5``: the catalogue's LeNet-5; a data set of smaller
images, e.g. the embedded 8 x 8 digits, gives each network its input size from the data) and seed, every method
of `METHODS` is fitted on the training part and scored on the test images (`Settings` has the sizes):

  map                 ``inference.point_estimate.point_estimate`` with `inference.fit`'s defaults (the reference of every cost)
  map_temperature     the map fit with one temperature fitted on the validation images (`evals.temperature_scale`)
  ensemble            ``inference.ensemble``: `Settings.ensemble_size` point estimates, the members as draws
  mc_dropout          ``inference.dropout.binary_dropout`` on every weight matrix (rate `Settings.dropout_rate`, untuned)
  mean_field          ``inference.mean_field`` with `inference.fit`'s defaults (Adam)
  ivon                ``inference.mean_field`` fitted by ``inference.ivon(steps=S)`` over the same S steps (its rule:
                      the rate cosine-decayed over S, beta2 = 1 - 1/S)
  ivon_half           the same over S / 2 steps (issue 43's goal asks IVON at half mean field's training time)
  k_tied              ``inference.k_tied.k_tied``, k = 2
  low_rank            ``inference.joint_gaussian.low_rank`` (rank `Settings.low_rank`)
  laplace_last_layer  ``inference.laplace(model, map, train, structure="last_layer", predictive="glm")``
  laplace_kfac        the same with ``structure="kfac"``
  laplace_*_val       the same two with the prior precision chosen on the validation images (``validation=``, the
                      images map_temperature fits its temperature on) instead of by the Laplace evidence

The data: raw gray images in [0, 1]. The training part's last `Settings.validation_fraction` is held back as the
VALIDATION images (temperatures are fitted there, never on the test images); every method is fitted on the rest
(the fit images), whose global pixel mean and sd standardise every input (clean and corrupted). `load_images`:
with no path the embedded scikit-learn digits (8 x 8, its fixed split); with a path a user's .npz of
``imgs`` / ``labs`` (`zoo.experiments.reproduce.image_npz.load_image_npz`: resized to 28 x 28, its fixed split,
e.g. USPS: training perm[:4000] of which perm[3200:4000] validation, test perm[4000:]).

Columns per (network, seed, method), `COLUMNS`: accuracy, NLL, ECE (15 bins) on the test images
(`evals.score`, `Settings.num_samples` draws; 1 for a point estimate, the members for an ensemble); cal_nll,
cal_ece and temperature: the same after temperature scaling on the validation images (`evals.score(...,
validation=...)`); cnll, cacc, cece over the corruption suite (`evals.ood.score_sets` on the first
`Settings.corrupt_images` test images corrupted by every type and severity, `Settings.corrupt_draws` draws; the
mean over severities of the mean over types, `evals.ood.aggregate`); cpu_s: the process CPU seconds
(`time.process_time`, all threads) of the training (tracing and compiling included, JAX's in-memory caches
cleared before every fit, so a row's cost does not depend on the rows before it; for map_temperature and the Laplace rows
the map fit's plus their own step), wall_s its wall time, cpu_vs_map = cpu_s / cpu_s of map (same network and
seed).

OOD detection per (network, seed, method) in ``ood_detection.csv`` (`score_detection`): AUROC, AUPR-in, AUPR-out and
FPR at 95 % TPR of the maximum probability, predictive entropy and mutual information, the test images against
them rotated by 90 degrees, with shuffled pixels, uniform noise, and corrupted at the highest severity.

Resumable: ``images.csv`` (and ``ood_detection.csv``) is rewritten after every row, the map posterior of each (network, seed) is saved under
``posteriors/`` (`inference.save`), and a run with ``resume=True`` keeps every finished row (its settings must
equal the folder's ``run.json``), fitting only the missing ones. The folder is claimed with
`base.run_folder.claim_run_folder` (the rule of `zoo run`): a folder of the user's or of another job is refused.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import time
import warnings
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np
import pandas as pd

from base.errors import InputError
from zoo.experiments.benchmarks.images_report import METHODS, with_relative_cost, write_report

JOB = "zoo benchmark images"
NETWORKS = ("mlp", "lenet5")
NEEDS_MAP = ("map_temperature", "laplace_last_layer", "laplace_kfac", "laplace_last_layer_val", "laplace_kfac_val")
"""Methods that start from the map fit (their cost includes it)."""
COLUMNS = ("network", "seed", "method", "accuracy", "nll", "ece", "cal_nll", "cal_ece", "temperature", "cnll",
           "cacc", "cece", "cpu_s", "wall_s", "cpu_vs_map", "draws")
CSV = "images.csv"
DETECTION_CSV = "ood_detection.csv"
DETECTION_KEYS = ("network", "seed", "method", "out_set", "score")


@dataclass(frozen=True)
class Settings:
    """What one run does (`FULL`, `QUICK`); part of the folder's identity (a resumed run must match it).

    steps, batch_size: every SVI fit (None: `inference.fit.default_steps`, 1,000 of 128). hidden: the mlp's hidden
    widths. num_samples: draws on the clean test images; corrupt_images, corrupt_draws, corruption_types (None:
    all 19), severities: the corruption suite. ensemble_size, dropout_rate, low_rank: the baselines' own settings,
    fixed a priori (the issue's). validation_fraction: the last part of the training images held back.
    """

    steps: int | None = None
    batch_size: int = 128
    hidden: tuple = (400, 400)
    num_samples: int = 100
    corrupt_images: int = 200
    corrupt_draws: int = 20
    corruption_types: tuple | None = None
    severities: tuple = (1, 2, 3, 4, 5)
    ensemble_size: int = 5
    dropout_rate: float = 0.1
    low_rank: int = 10
    validation_fraction: float = 0.2


FULL = Settings()
QUICK = replace(FULL, steps=300, hidden=(64,), num_samples=20, corrupt_images=50, corrupt_draws=5,
                corruption_types=("gaussian_noise", "contrast", "motion_blur"), severities=(1, 3, 5),
                ensemble_size=3)


@dataclass(frozen=True)
class Images:
    """Raw gray images in [0, 1], (N, H, W, 1) float32, with int32 labels: the fit, validation and test parts.
    mean, sd: the fit images' global pixel mean and sd (one number each: `standardise`)."""

    name: str
    x_fit: np.ndarray
    y_fit: np.ndarray
    x_val: np.ndarray
    y_val: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    mean: float = field(init=False)
    sd: float = field(init=False)

    def __post_init__(self):
        object.__setattr__(self, "mean", float(self.x_fit.mean()))
        object.__setattr__(self, "sd", float(self.x_fit.std()) or 1.0)

    @property
    def side(self) -> int:
        return int(self.x_fit.shape[1])

    def inputs(self, x, network: str) -> np.ndarray:
        """Raw images x (N, H, W, 1) as `network`'s inputs: standardised, flat rows (N, H * W) for the mlp."""
        z = ((np.asarray(x, np.float32) - self.mean) / self.sd).astype(np.float32)
        return z.reshape(len(z), -1) if network == "mlp" else z


def load_images(path=None, validation_fraction: float = 0.2) -> Images:
    """The benchmark's images (module docstring). path: None (the embedded digits) or a .npz of ``imgs`` (N, H, W)
    and ``labs`` (N,) (`load_image_npz`, resized to 28 x 28; its standardised pixels are mapped back to [0, 1] by
    the training images' smallest and largest value, an affine map, so corruptions see [0, 1] images).
    The last `validation_fraction` of the training part is the validation part."""
    if not 0 < validation_fraction < 1:
        raise InputError("validation_fraction", validation_fraction, "a fraction in (0, 1)")
    if path is None:
        from zoo.data import digits

        train, test = digits(standardise=False)
        side = train.image_shape[0]
        x_tr, y_tr = train.x.reshape(-1, side, side, 1), train.y
        x_te, y_te, name = test.x.reshape(-1, side, side, 1), test.y, "digits (embedded, 8x8)"
    else:
        from zoo.experiments.reproduce.image_npz import load_image_npz

        x_tr, y_tr, x_te, y_te = load_image_npz(path)
        lo, hi = float(x_tr.min()), float(x_tr.max())
        x_tr, x_te = [np.clip((x - lo) / ((hi - lo) or 1.0), 0.0, 1.0).astype(np.float32) for x in (x_tr, x_te)]
        name = f"{Path(path).name} (28x28)"
    n_fit = len(x_tr) - max(1, int(round(validation_fraction * len(x_tr))))
    x_tr, x_te = np.asarray(x_tr, np.float32), np.asarray(x_te, np.float32)
    y_tr, y_te = np.asarray(y_tr, np.int32), np.asarray(y_te, np.int32)
    return Images(name, x_tr[:n_fit], y_tr[:n_fit], x_tr[n_fit:], y_tr[n_fit:], x_te, y_te)


def build_entry(network: str, images: Images, settings: Settings):
    """The catalogue entry `network` ("mlp" with `Settings.hidden`, or "lenet5") on the fit and test images."""
    import zoo

    data = (images.inputs(images.x_fit, network), images.y_fit, images.inputs(images.x_test, network),
            images.y_test)
    classes = int(max(images.y_fit.max(), images.y_val.max(), images.y_test.max())) + 1
    kwargs = {"hidden": tuple(settings.hidden)} if network == "mlp" else {}
    return zoo.get(network, data=data, data_kwargs={"num_classes": classes}, **kwargs)


@dataclass
class Fitted:
    """One method's predictor (a Posterior, or a temperature-scaled one), the draws it is scored with, its
    training cost (process CPU and wall seconds, the map fit's included where it starts from it)."""

    predictor: object
    draws: int
    cpu_s: float
    wall_s: float


class Clock:
    """Process CPU and wall seconds of a ``with`` block (``.cpu``, ``.wall``)."""

    def __enter__(self):
        self._cpu, self._wall = time.process_time(), time.perf_counter()
        return self

    def __exit__(self, *exc):
        self.cpu, self.wall = time.process_time() - self._cpu, time.perf_counter() - self._wall
        return False


def fit_quietly(model, guide, data, settings: Settings, seed: int, **kwargs):
    """`inference.fit` with the run's steps and batch size, no progress bar, its convergence warnings silenced
    (the table records what the defaults give)."""
    import inference

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", inference.ConvergenceWarning)
        warnings.simplefilter("ignore", inference.PosteriorCollapseWarning)
        return inference.fit(model, guide, data, steps=settings.steps, batch_size=settings.batch_size, seed=seed,
                             progress=False, **kwargs)


def guide_for(method: str, model, settings: Settings):
    """The guide of the SVI method `method` (map, mc_dropout, mean_field, ivon(_half), k_tied, low_rank)."""
    import inference

    if method == "map":
        return inference.point_estimate.point_estimate(model)
    if method == "mc_dropout":
        return inference.dropout.binary_dropout(model, dropout_sites=["*/w"], rate=settings.dropout_rate)
    if method == "k_tied":
        return inference.k_tied.k_tied(model, k=2)
    if method == "low_rank":
        return inference.joint_gaussian.low_rank(model, rank=settings.low_rank)
    return inference.mean_field(model)


def fit_method(method: str, entry, images: Images, settings: Settings, seed: int, map_fit: Fitted | None) -> Fitted:
    """Fit `method` (one of `METHODS`) on the entry's training images; `map_fit`: this seed's map (methods in
    `NEEDS_MAP` start from it and add its cost). JAX's in-memory caches are cleared first, so that a row's cost
    does not depend on what the process fitted before it (the persistent compilation cache, `zoo.compilation_cache`,
    stays as configured)."""
    import jax

    import inference
    from inference.fit import default_steps

    jax.clear_caches()  # every fit traces and compiles (or loads from the persistent cache) its own programs
    if method in NEEDS_MAP:
        if map_fit is None:
            raise InputError("map_fit", None, f"the map fit that {method} starts from")
        with Clock() as clock:
            predictor = post_hoc(method, entry, images, map_fit.predictor)
        draws = 1 if method == "map_temperature" else settings.num_samples
        return Fitted(predictor, draws, map_fit.cpu_s + clock.cpu, map_fit.wall_s + clock.wall)
    with Clock() as clock:
        if method == "ensemble":
            post = inference.ensemble(entry.model, entry.train, members=settings.ensemble_size, seed=seed,
                                      steps=settings.steps, batch_size=settings.batch_size)
        else:
            steps = settings.steps or default_steps(len(entry.train.y), settings.batch_size)
            if method.startswith("ivon"):
                steps = steps // 2 if method == "ivon_half" else steps
                settings = replace(settings, steps=steps)
            extra = {"optimizer": inference.ivon(steps=steps)} if method.startswith("ivon") else {}
            post = fit_quietly(entry.model, guide_for(method, entry.model, settings), entry.train, settings, seed,
                               **extra)
    draws = 1 if method == "map" else settings.ensemble_size if method == "ensemble" else settings.num_samples
    return Fitted(post, draws, clock.cpu, clock.wall)


def post_hoc(method: str, entry, images: Images, map_posterior):
    """The predictor of a method that starts from the map posterior: temperature scaling on the validation images,
    or a GLM Laplace posterior (last layer or KFAC) on the fit images, its prior precision by the evidence or, for
    the ``_val`` methods, on the validation images."""
    import inference

    if method == "map_temperature":
        import evals
        from evals.temperature import TemperedPosterior

        return TemperedPosterior(map_posterior, evals.temperature_scale(map_posterior, validation(entry, images),
                                                                        num_samples=1).temperature)
    structure = method.removeprefix("laplace_").removesuffix("_val")
    held_out = validation(entry, images) if method.endswith("_val") else None
    return inference.laplace(entry.model, map_posterior, entry.train, structure=structure, predictive="glm",
                             validation=held_out)


def validation(entry, images: Images):
    """The validation images (x, y) as the entry's network takes them."""
    network = entry.name
    return images.inputs(images.x_val, network), images.y_val


def score_clean(fitted: Fitted, entry, images: Images, seed: int) -> dict:
    """{accuracy, nll, ece, cal_nll, cal_ece, temperature} of `fitted` on the test images (`evals.score`, with
    the validation images for the calibrated columns)."""
    import evals

    table = evals.score(fitted.predictor, entry.test, num_samples=fitted.draws, seed=seed, verbose=False,
                        validation=validation(entry, images), name="row")
    row = table.iloc[0]
    out = {k: float(row[k]) for k in ("accuracy", "nll", "ece")}
    names = {"cal_nll": "calibrated_nll", "cal_ece": "calibrated_ece", "temperature": "temperature"}
    out.update({k: float(row[v]) if v in row.index else float("nan") for k, v in names.items()})
    return out


def corruption_sets(images: Images, settings: Settings) -> list:
    """[(type, severity, raw corrupted images, labels)] of the first `Settings.corrupt_images` test images (seed 0:
    every method and seed sees the same sets)."""
    from evals.corruptions import corrupted

    n = min(settings.corrupt_images, len(images.y_test))
    subset = type("Images", (), {"x": images.x_test[:n], "y": images.y_test[:n]})
    types = None if settings.corruption_types is None else list(settings.corruption_types)
    return list(corrupted(subset, types=types, severities=tuple(settings.severities), seed=0))


def score_corrupted(name: str, fitted: Fitted, network: str, images: Images, sets: list, settings: Settings,
                    seed: int) -> dict:
    """{cnll, cacc, cece} of `fitted` over the corrupted `sets` (`evals.ood.score_sets`, then
    `evals.ood.aggregate`: the mean over severities of the mean over types)."""
    from evals import ood

    draws = min(fitted.draws, settings.corrupt_draws)
    results = ood.score_sets({name: fitted.predictor}, sets, num_samples=draws, seed=seed,
                             preprocess=lambda x: images.inputs(x, network), max_rows=1000)
    agg = ood.aggregate(results.table, reference=None).loc[name]
    return {"cnll": float(agg["cnll"]), "cacc": float(agg["caccuracy"]), "cece": float(agg["cece"])}


def score_detection(name: str, fitted: Fitted, network: str, images: Images, sets: list, settings: Settings,
                    seed: int) -> pd.DataFrame:
    """Out-of-distribution detection of `fitted` (`zoo.experiments.detection_tables.detection_rows`): every test
    image against the test images rotated by 90 degrees, with shuffled pixels, uniform noise, and the corrupted
    `sets` at their highest severity (as many images each), `Settings.corrupt_draws` draws at most. One row per
    (out_set, score), the keys `DETECTION_KEYS` first."""
    from zoo.experiments.detection_tables import detection_rows

    table = detection_rows({name: fitted.predictor}, images.x_test, sets, lambda x: images.inputs(x, network),
                           num_samples=min(fitted.draws, settings.corrupt_draws), seed=seed)
    rows = table.reset_index().drop(columns="posterior")
    rows.insert(0, "method", name)
    rows.insert(0, "seed", seed)
    rows.insert(0, "network", network)
    return rows


def check_request(networks, seeds, methods) -> tuple:
    """(networks, seeds, methods) checked before any work (InputError naming the option): known names, no
    repeats, seeds non-negative integers; "map" is added first (every cost is relative to it)."""
    networks = tuple(networks) if networks else NETWORKS
    methods = tuple(methods) if methods else METHODS
    seeds = tuple(seeds) if seeds is not None else (0, 1, 2)
    for option, values, known in (("--networks", networks, NETWORKS), ("--methods", methods, METHODS)):
        unknown = [v for v in values if v not in known]
        if unknown:
            raise InputError(option, ",".join(map(str, unknown)), f"names among {','.join(known)}", "unknown name")
        if len(set(values)) != len(values):
            raise InputError(option, ",".join(values), "each name once")
    if not seeds or any(not isinstance(s, (int, np.integer)) or isinstance(s, bool) or s < 0 for s in seeds) \
            or len(set(seeds)) != len(seeds):
        raise InputError("--seeds", ",".join(map(str, seeds)), "distinct non-negative integers, e.g. 0,1,2")
    methods = ("map",) + tuple(m for m in METHODS if m in methods and m != "map")
    return networks, tuple(int(s) for s in seeds), methods


def provenance() -> dict:
    """Where the numbers come from: the commit (``git describe --always --dirty``, when the package is a checkout), the machine
    (platform, CPU cores) and the 1-minute load average when the run starts."""
    root = Path(__file__).resolve().parents[3]
    try:
        commit = subprocess.run(["git", "-C", str(root), "describe", "--always", "--dirty"], capture_output=True,
                                text=True, timeout=10).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        commit = None
    load = round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None
    return {"commit": commit, "machine": f"{platform.machine()} {platform.system()}, {os.cpu_count()} CPU cores",
            "load_at_start": load}


def read_finished(out: Path, settings: Settings, data_name: str) -> pd.DataFrame:
    """The rows of an earlier run in `out` to keep on resume; InputError when its run.json records other settings
    or another data set (the rows would not be comparable)."""
    info_path, csv_path = out / "run.json", out / CSV
    if not info_path.is_file() or not csv_path.is_file():
        return pd.DataFrame(columns=list(COLUMNS))
    info = json.loads(info_path.read_text())
    mine = settings_dict(settings)
    if info.get("settings") != mine or info.get("data") != data_name:
        raise InputError("--resume", str(out), f"a folder of a run with the same data ({data_name}) and settings",
                         f"it holds a run on {info.get('data')} with settings {info.get('settings')}")
    return pd.read_csv(csv_path)


def run(out_dir, images: Images, settings: Settings, *, networks=NETWORKS, seeds=(0, 1, 2), methods=METHODS,
        resume: bool = False, command: str = JOB, log=print) -> pd.DataFrame:
    """Fit and score every (network, seed, method) not finished yet; write ``images.csv`` (after every row),
    ``run.json``, ``summary.md`` and ``images.png`` into `out_dir` (claimed with `claim_run_folder`). Returns the
    table (one row per (network, seed, method), `COLUMNS`)."""
    import jax

    import inference
    from base.run_folder import claim_run_folder
    from zoo.progress_line import ProgressLine

    networks, seeds, methods = check_request(networks, seeds, methods)
    out = Path(claim_run_folder(out_dir, JOB, "--out"))
    table = read_finished(out, settings, images.name) if resume else pd.DataFrame(columns=list(COLUMNS))
    info = {"command": command, "data": images.name, "settings": settings_dict(settings), **provenance()}
    (out / "run.json").write_text(json.dumps(info, indent=1))
    done = {(r.network, int(r.seed), r.method) for r in table.itertuples()}
    rows = table.to_dict("records")
    detection = [read_detection(out, done)] if resume else []
    sets = None
    jax.block_until_ready(jax.numpy.zeros(()) + 1)  # the backend's start, a process's once, is no fit's cost
    todo_all = [(n, s, m) for n in networks for s in seeds for m in methods if (n, s, m) not in done]
    # one progress line, a part per row (zoo.progress_line): rewritten on a terminal, plain lines elsewhere
    line = ProgressLine(max(1, len(todo_all)), log=None if log is print else log)
    log = line.log
    for network in networks:
        todo = [(s, m) for s in seeds for m in methods if (network, s, m) not in done]
        if not todo:
            continue
        entry = build_entry(network, images, settings)
        for seed in seeds:
            map_fit = None
            for method in [m for m in methods if (network, seed, m) not in done]:
                line.update(todo_all.index((network, seed, method)), f"{method} on {network} seed {seed}")
                if method in NEEDS_MAP and map_fit is None:
                    map_fit = load_map(out, entry, network, seed, table)
                fitted = fit_method(method, entry, images, settings, seed, map_fit)
                if method == "map":
                    map_fit = fitted
                    assert isinstance(fitted.predictor, inference.Posterior)  # fit returns one
                    inference.save(fitted.predictor, map_path(out, network, seed))
                sets = corruption_sets(images, settings) if sets is None else sets
                map_cpu = map_fit.cpu_s if map_fit is not None else _map_cpu(rows, network, seed)
                row = {"network": network, "seed": seed, "method": method,
                       **score_clean(fitted, entry, images, seed),
                       **score_corrupted(method, fitted, network, images, sets, settings, seed),
                       "cpu_s": fitted.cpu_s, "wall_s": fitted.wall_s, "cpu_vs_map": fitted.cpu_s / map_cpu,
                       "draws": fitted.draws}
                detection.append(score_detection(method, fitted, network, images, sets, settings, seed))
                rows.append(row)
                done.add((network, seed, method))
                pd.concat(detection, ignore_index=True).to_csv(out / DETECTION_CSV, index=False)
                with_relative_cost(pd.DataFrame(rows, columns=list(COLUMNS))).to_csv(out / CSV, index=False)
                log(f"  {network} seed {seed} {method:<18} acc {row['accuracy']:.3f}  NLL {row['nll']:.3f}  "
                    f"ECE {row['ece']:.3f}  cNLL {row['cnll']:.3f}  CPU {row['cpu_s']:6.1f} s "
                    f"({row['cpu_vs_map']:.2f} x map)")
    line.close()
    table = with_relative_cost(pd.DataFrame(rows, columns=list(COLUMNS)))
    info["load_at_end"] = round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None
    (out / "run.json").write_text(json.dumps(info, indent=1))
    write_report(out, table, info)
    from zoo.report import write_report as write_page

    page = write_page(out)
    log(f"wrote {out / CSV}, {out / DETECTION_CSV}, {out / 'summary.md'}, {out / 'images.png'}; the report to read: "
        f"{page}")
    return table


def read_detection(out: Path, done: set) -> pd.DataFrame:
    """The OOD detection rows of an earlier (resumed) run in `out` whose (network, seed, method) row is kept."""
    path = out / DETECTION_CSV
    if not path.is_file():
        return pd.DataFrame(columns=list(DETECTION_KEYS))
    table = pd.read_csv(path)
    keep = [(r.network, int(r.seed), r.method) in done for r in table.itertuples()]
    return table[keep]


def map_path(out: Path, network: str, seed: int) -> Path:
    """Where the map posterior of (network, seed) is saved in the run folder."""
    return out / "posteriors" / f"{network}-seed{seed}-map"


def _map_cpu(rows, network: str, seed: int) -> float:
    cpu = [r["cpu_s"] for r in rows if r["network"] == network and int(r["seed"]) == seed and r["method"] == "map"]
    return float(cpu[0]) if cpu else float("nan")


def load_map(out: Path, entry, network: str, seed: int, table: pd.DataFrame) -> Fitted:
    """The map fit of an earlier (resumed) run: its saved posterior and the CPU / wall seconds its row records."""
    import inference

    row = table[(table.network == network) & (table.seed == seed) & (table.method == "map")].iloc[0]
    post = inference.load(str(map_path(out, network, seed)), entry.model)
    return Fitted(post, 1, float(row.cpu_s), float(row.wall_s))


def main(*, data=None, networks=None, seeds=None, methods=None, out="zoo-results/images", quick=False,
         resume=False, log=print) -> pd.DataFrame:
    """`zoo benchmark images`: the `QUICK` or `FULL` settings, checked names, the images (`load_images`), `run`."""
    from base.run_folder import check_run_folder

    networks, seeds, methods = check_request(networks, seeds, methods)
    check_run_folder(out, JOB, "--out")  # before any work
    settings = QUICK if quick else FULL
    images = load_images(data, settings.validation_fraction)
    command = (f"zoo benchmark images{' --data ' + str(data) if data else ''} --networks {','.join(networks)} "
               f"--seeds {','.join(map(str, seeds))} --methods {','.join(methods)}{' --quick' if quick else ''} "
               f"--out {out}{' --resume' if resume else ''}")
    log(f"{command}: {images.name}, {len(images.y_fit)} fit / {len(images.y_val)} validation / "
        f"{len(images.y_test)} test images; {'quick' if quick else 'full'} settings")
    return run(out, images, settings, networks=networks, seeds=seeds, methods=methods, resume=resume,
               command=command, log=log)


def settings_dict(settings: Settings) -> dict:
    """The settings as a plain JSON-able dict (tuples as lists, as run.json reads back)."""
    return json.loads(json.dumps(asdict(settings)))
