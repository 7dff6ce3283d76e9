"""Rank-1 BNNs (Dusenberry et al., ICML 2020): Table 2 on CIFAR-10 / CIFAR-10-C with a Wide ResNet, the `--full`
part of `zoo reproduce rank1` that needs the TFDS data sets (``cifar10`` and the 95 ``cifar10_corrupted`` configs,
prepared under `data_dir`; nothing downloads).

`CifarJob` holds the paper's appendix B settings (Table 5, CIFAR-10 column): WRN-28-10, K = 4, SGD with momentum
0.9 at base rate 0.1 decayed x 0.2 at epochs 80, 160, 180, 250 epochs for rank-1 (200 for the deterministic net),
the KL annealed linearly over 200 epochs, total batch 512 (64 per core x 8 cores), L2 1e-4, factor prior
Normal/Cauchy(1, 0.1), sigma initialised from dropout rate 1e-3 (Normal) or 1e-6 (Cauchy), means from N(1, 0.5)
(random_sign_init -0.5), 1 draw per component at evaluation. What differs here: no data augmentation (the
library's loaders have none), and L2 becomes the Normal prior sd of W (`l2_prior_scale`). `cifar_table2` trains and
scores; `cifar_part` adds its table and finding to a report, or "not run" with the reason when the sets are not
prepared.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from zoo.experiments.reproduce.rank1_setup import score_table
from zoo.experiments.reproduce.rank1_verdicts import shown
from zoo.experiments.reproduce.rank1_wrn import WRN_METHODS, wrn_entry_guide

__all__ = ["CifarJob", "CIFAR_FULL", "l2_prior_scale", "lr_schedule", "sgd_schedule", "cifar_table2", "cifar_part", "CIFAR_CLAIM"]

CIFAR_CLAIM = ("WRN on CIFAR-10 / CIFAR-10-C: rank-1 (Normal) beats deterministic and BatchEnsemble on NLL and ECE, "
               "more so under corruption")


@dataclass(frozen=True)
class CifarJob:
    """The CIFAR-10 part of Table 2 (paper appendix B, Table 5). depth, width: WRN-depth-width; num_components: K;
    epochs / det_epochs: rank-1 / deterministic training length; kl_epochs: linear KL annealing; batch_size:
    examples per step (every component sees them all); lr, momentum, decay_epochs, decay_ratio: SGD's schedule;
    l2: weight decay (as a Normal prior, `l2_prior_scale`); the factor prior is the catalogue entry's Normal/
    Cauchy(1, 0.1), Table 5's; dropout_rate,
    cauchy_dropout_rate: sigma inits; sign_init: loc init (-0.5: N(1, 0.5)); seeds; types, severities:
    CIFAR-10-C (None: all 19 types); steps: overrides the epochs (tests); max_train: use the first examples only
    (tests); chunk_size: steps per compiled chunk."""

    depth: int = 28
    width: int = 10
    num_components: int = 4
    epochs: int = 250
    det_epochs: int = 200
    kl_epochs: int = 200
    batch_size: int = 512
    lr: float = 0.1
    momentum: float = 0.9
    decay_epochs: tuple = (80, 160, 180)
    decay_ratio: float = 0.2
    l2: float = 1e-4
    dropout_rate: float = 1e-3
    cauchy_dropout_rate: float = 1e-6
    sign_init: float = -0.5
    seeds: tuple = (0,)
    types: tuple | None = None
    severities: tuple = (1, 2, 3, 4, 5)
    methods: tuple = ("deterministic", "batch_ensemble", "rank1_normal", "rank1_cauchy")
    steps: int | None = None
    max_train: int | None = None
    chunk_size: int = 100


CIFAR_FULL = CifarJob(seeds=tuple(range(10)))
"""The paper's CIFAR-10 settings and its 10 seeds (days of accelerator time for WRN-28-10)."""


def l2_prior_scale(l2: float, n_train: int) -> float:
    """The Normal(0, sd) prior on W equivalent to weight decay `l2` on the mean per-example loss: the ELBO counts
    -log p(W) = |W|^2 / (2 sd^2) once against n_train examples, so sd = 1 / sqrt(2 l2 n_train) (l2 = 1e-4 on 50,000
    CIFAR images: sd = 0.316)."""
    return 1.0 / math.sqrt(2.0 * l2 * n_train)


def lr_schedule(job: CifarJob, n_train: int, steps: int):
    """SGD's rate per step: ``job.lr / n_train`` (the library's loss is summed over the data set, the paper's is the
    mean per example), times ``decay_ratio`` at each of ``decay_epochs`` (epochs of ``n_train / batch_size`` steps;
    boundaries past `steps` dropped). An optax schedule step -> rate."""
    import optax

    per_epoch = n_train / job.batch_size
    boundaries = {int(e * per_epoch): job.decay_ratio for e in job.decay_epochs if int(e * per_epoch) < steps}
    return optax.piecewise_constant_schedule(job.lr / n_train, boundaries)


def sgd_schedule(job: CifarJob, n_train: int, steps: int):
    """SGD with momentum ``job.momentum`` at `lr_schedule`."""
    import optax

    return optax.sgd(lr_schedule(job, n_train, steps), momentum=job.momentum)


def _steps(job: CifarJob, method: str, n_train: int) -> int:
    if job.steps is not None:
        return int(job.steps)
    epochs = job.det_epochs if method == "deterministic" else job.epochs
    return int(math.ceil(epochs * n_train / job.batch_size))


def cifar_table2(job: CifarJob, data_dir=None, log=print) -> pd.DataFrame:
    """Train every method of ``job.methods`` on CIFAR-10 (TFDS "cifar10" train split, all 50,000 images: the
    settings are the paper's, nothing is chosen here) and score it on the test split and CIFAR-10-C
    (`zoo.data.cifar10_c.tfds_corrupted`). Returns one row per (method, seed): NLL, Acc, ECE, cNLL, cA, cECE, mCE
    (vs the deterministic net), #params, seed. Raises ``DatasetNotPreparedError`` when a set is missing."""
    import inference
    from zoo.data.cifar10_c import tfds_corrupted

    log = log or (lambda line: None)
    from zoo.data.tfds_loaders import load_tfds

    train, test = load_tfds("cifar10", "train", data_dir), load_tfds("cifar10", "test", data_dir)
    sets = list(tfds_corrupted(job.types, job.severities, data_dir))  # all present before hours of training
    xtr, ytr = (train.x, train.y) if job.max_train is None else (train.x[:job.max_train], train.y[:job.max_train])
    n = len(xtr)
    runs = []
    for seed in job.seeds:
        posts, counts = {}, {}
        for method in job.methods:
            rank1 = WRN_METHODS[method][0]
            steps = _steps(job, method, n)
            entry, guide = wrn_entry_guide(method, (xtr, ytr, test.x, test.y), data_kwargs={"num_classes": 10},
                                           depth=job.depth, width=job.width, num_components=job.num_components,
                                           prior_scale=l2_prior_scale(job.l2, n), sign_init=job.sign_init,
                                           dropout_rate=job.dropout_rate, cauchy_dropout_rate=job.cauchy_dropout_rate)
            log(f"[rank1] CIFAR-10 {method} seed {seed}: {steps} steps of batch {job.batch_size}")
            posts[method] = inference.fit(entry.model, guide, (xtr, ytr), steps=steps, batch_size=job.batch_size,
                                          optimizer=sgd_schedule(job, n, steps), seed=seed, progress=False,
                                          kl_warmup=int(steps * job.kl_epochs / job.epochs) if rank1 else 0,
                                          chunk_size=min(job.chunk_size, steps))
            counts[method] = int(posts[method].guide.num_free_params(posts[method].params))
        summary = score_table(posts, sets, test, draws={m: 1 for m in posts}, seed=seed, num_params=counts)
        runs.append(summary.assign(seed=seed, converged=summary["method"].map(
            lambda m: getattr(getattr(posts[m], "info", None), "converged", None))))
        log(f"  CIFAR-10 seed {seed}:\n{summary.round(4).to_string(index=False)}")
    return pd.concat(runs, ignore_index=True)


def cifar_part(report, job: CifarJob, data_dir, log=print, finding=None) -> pd.DataFrame | None:
    """Run `cifar_table2` and add its table (mean +- SE over seeds) and the finding `CIFAR_CLAIM` (through
    ``finding(report, runs, claim)``) to `report`; when `data_dir` is None or lacks a set, the finding is
    "not run" with the reason. Returns the runs or None."""
    from zoo.data.tfds_loaders import DatasetNotPreparedError

    if data_dir is None:
        report.finding(CIFAR_CLAIM, "not run", "no --data-dir with the TFDS sets cifar10 and cifar10_corrupted was "
                                               "given; the digits tables above stand in for it")
        return None
    try:
        runs = cifar_table2(job, data_dir, log)
    except (DatasetNotPreparedError, ImportError) as err:
        report.finding(CIFAR_CLAIM, "not run", f"the data sets are not usable: {err}")
        return None
    metrics = [m for m in ("NLL", "Acc", "ECE", "cNLL", "cA", "cECE", "mCE", "#params") if m in runs]
    report.table("table2_cifar10", shown(runs, "method", metrics),
                 f"Table 2 on CIFAR-10 / CIFAR-10-C, WRN-{job.depth}-{job.width}, K = {job.num_components} "
                 f"(mean +- SE over seeds {job.seeds})")
    report.table("table2_cifar10_runs", runs, "Table 2 on CIFAR-10, every run")
    if finding is not None:
        finding(report, runs, CIFAR_CLAIM)
    return runs
