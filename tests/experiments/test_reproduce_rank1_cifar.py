"""`zoo reproduce rank1 --full`'s CIFAR-10 / CIFAR-10-C part (`zoo.experiments.reproduce.rank1_cifar`): end to end on
`tfds.testing.mock_data` with a tiny WRN (depth 10, k 1, 2 steps), and "not run" with the reason without the sets."""
import math

import pandas as pd
import pytest

from zoo.experiments.reproduce.rank1_cifar import CIFAR_CLAIM, CIFAR_FULL, CifarJob, cifar_part, l2_prior_scale, lr_schedule
from zoo.experiments.reproduce.rank1_verdicts import table2_finding
from zoo.experiments.reproduce.report import Report

TINY = CifarJob(depth=10, width=1, num_components=2, steps=2, batch_size=4, chunk_size=2, max_train=8,
                methods=("deterministic", "rank1_normal"), types=("gaussian_noise",), severities=(1,))


def test_the_full_setting_is_the_papers_appendix_table_5():
    job = CIFAR_FULL
    assert (job.depth, job.width, job.num_components, job.epochs, job.kl_epochs, job.batch_size) == (28, 10, 4, 250,
                                                                                                   200, 512)
    assert (job.dropout_rate, job.cauchy_dropout_rate, job.sign_init, job.l2) == (1e-3, 1e-6, -0.5, 1e-4)
    assert l2_prior_scale(1e-4, 50_000) == pytest.approx(1 / math.sqrt(10.0))  # |W|^2/(2 sd^2) = N l2 |W|^2
    lr = lr_schedule(job, 50_000, 24_414)  # SGD on the summed loss: 0.1 / N, x 0.2 after epochs 80, 160, 180
    per_epoch = 50_000 / 512
    for epoch, factor in ((0, 1.0), (79, 1.0), (81, 0.2), (161, 0.04), (181, 0.008), (249, 0.008)):
        assert float(lr(int(epoch * per_epoch))) == pytest.approx(0.1 / 50_000 * factor, rel=1e-5), epoch


def test_without_the_data_sets_the_finding_is_not_run_with_the_reason(tmp_path):
    report = Report(tmp_path / "out", "t", "full", log=None)
    assert cifar_part(report, TINY, None, log=None) is None
    assert cifar_part(report, TINY, str(tmp_path / "empty"), log=None) is None
    (claim, verdict, reason, *_), (_, verdict2, reason2, *_) = report.findings
    assert claim == CIFAR_CLAIM and verdict == verdict2 == "not run"
    assert "--data-dir" in reason and "not usable" in reason2 and "cifar10" in reason2


def test_tiny_wrn_end_to_end_on_mock_tfds(tmp_path):
    tfds = pytest.importorskip("tensorflow_datasets")
    report = Report(tmp_path / "out", "t", "full", log=None)
    with tfds.testing.mock_data(num_examples=8):
        runs = cifar_part(report, TINY, str(tmp_path), log=None, finding=table2_finding)
    assert list(runs["method"]) == ["deterministic", "rank1_normal"]
    assert runs.set_index("method").loc["deterministic", "mCE"] == pytest.approx(100.0)
    assert runs["#params"].iloc[1] > runs["#params"].iloc[0]
    shown = pd.read_csv(tmp_path / "out" / "table2_cifar10.csv")
    assert {"NLL", "Acc", "ECE", "cNLL", "cA", "cECE", "mCE"} <= set(shown.columns)
    assert [f.claim for f in report.findings] == [CIFAR_CLAIM]
