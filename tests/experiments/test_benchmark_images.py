"""`zoo benchmark images` (zoo.experiments.benchmarks.images): the CSV against direct library calls, a killed run
resumed, the folder rule. A tiny MLP on the embedded digits, 2 methods, 1 seed, 200 steps."""

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import roc_auc_score

import evals
import inference
from base.errors import FolderNotOwnedError, InputError
from zoo.experiments.benchmarks import images

SETTINGS = replace(images.QUICK, hidden=(8,), steps=200, num_samples=5, corrupt_images=30, corrupt_draws=3,
                   corruption_types=("contrast",), severities=(2,))
METHODS = ("map", "mc_dropout")


@pytest.fixture(scope="module")
def data():
    return images.load_images(None, SETTINGS.validation_fraction)


@pytest.fixture(scope="module")
def finished(tmp_path_factory, data):
    out = tmp_path_factory.mktemp("board") / "run"
    table = images.run(out, data, SETTINGS, networks=("mlp",), seeds=(0,), methods=METHODS, log=lambda _: None)
    return out, table


def test_csv_columns_and_numbers_against_direct_calls(finished, data):
    out, table = finished
    csv = pd.read_csv(out / images.CSV)
    assert tuple(csv.columns) == images.COLUMNS
    assert list(csv.method) == list(METHODS) and set(csv.network) == {"mlp"} and set(csv.seed) == {0}
    assert (out / "summary.md").is_file() and (out / "images.png").is_file()
    # the validation images are the training part's last 20 %, never test images; the fit images are the rest
    assert len(data.y_fit) + len(data.y_val) == 1348 and len(data.y_val) == 270 and len(data.y_test) == 449
    # the map row equals a direct fit with the same seed and settings, scored by evals.score
    entry = images.build_entry("mlp", data, SETTINGS)
    direct = inference.fit(entry.model, inference.point_estimate(entry.model), entry.train, steps=SETTINGS.steps,
                           batch_size=SETTINGS.batch_size, seed=0, progress=False)
    row = csv.set_index("method").loc["map"]
    clean = evals.score(direct, entry.test, num_samples=1, verbose=False).iloc[0]
    np.testing.assert_allclose([row.accuracy, row.nll, row.ece], [clean.accuracy, clean.nll, clean.ece], rtol=1e-5)
    # cNLL: the mean NLL over the corrupted sets (one type, one severity here), predicted directly
    (kind, severity, x, y), = images.corruption_sets(data, SETTINGS)
    log_lik = direct.log_likelihood(data.inputs(x, "mlp"), y, num_samples=1)
    np.testing.assert_allclose(row.cnll, evals.metrics.nll_from_log_likelihood(log_lik), rtol=1e-5)
    assert (kind, severity, len(y)) == ("contrast", 2, SETTINGS.corrupt_images)
    dropout = csv.set_index("method").loc["mc_dropout"]
    assert dropout.cpu_vs_map == pytest.approx(dropout.cpu_s / row.cpu_s) and row.cpu_vs_map == 1.0
    assert dropout.draws == SETTINGS.num_samples and 0.5 < dropout.accuracy <= 1
    # OOD detection: every method x out set x score; map's AUROC of the entropy against the rotated test images is
    # scikit-learn's of the entropies of the direct fit's predictions
    detection = pd.read_csv(out / images.DETECTION_CSV)
    assert tuple(detection.columns[:5]) == images.DETECTION_KEYS and len(detection) == len(METHODS) * 4 * 3
    entropy = [(lambda p: -np.sum(p * np.log(np.clip(p, 1e-30, 1.0)), -1))(
        direct.predict(data.inputs(x, "mlp"), num_samples=1)[0]) for x in (data.x_test, np.rot90(data.x_test, axes=(1, 2)))]
    auroc = roc_auc_score(np.r_[np.zeros(len(entropy[0])), np.ones(len(entropy[1]))], np.r_[entropy[0], entropy[1]])
    got = detection.set_index(["method", "out_set", "score"]).loc[("map", "rotated_90", "entropy"), "auroc"]
    assert got == pytest.approx(auroc, abs=1e-3)
    assert "## Out-of-distribution detection" in (out / "summary.md").read_text()
    assert (out / "ood_detection.png").is_file() and (out / "report.html").is_file()


def test_killed_run_resumes_keeping_finished_rows(finished, data, tmp_path):
    out = tmp_path / "run"

    def kill_after_first_row(line):
        if "seed 0 map" in line:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        images.run(out, data, SETTINGS, networks=("mlp",), seeds=(0,), methods=METHODS, log=kill_after_first_row)
    first = pd.read_csv(out / images.CSV)
    assert list(first.method) == ["map"]
    resumed = images.run(out, data, SETTINGS, networks=("mlp",), seeds=(0,), methods=METHODS, resume=True,
                         log=lambda _: None)
    assert list(resumed.method) == list(METHODS)
    assert list(dict.fromkeys(pd.read_csv(out / images.DETECTION_CSV).method)) == list(METHODS)  # kept, then added
    pd.testing.assert_frame_equal(resumed.iloc[:1].reset_index(drop=True).astype(first.dtypes), first)
    # the resumed rows are the uninterrupted run's (the same seeds, the map posterior reloaded from the folder)
    whole = finished[1].set_index("method")
    for method in METHODS:
        got = resumed.set_index("method").loc[method]
        np.testing.assert_allclose([got.nll, got.accuracy, got.cnll],
                                   [whole.loc[method, "nll"], whole.loc[method, "accuracy"],
                                    whole.loc[method, "cnll"]], rtol=1e-5)
    # other settings cannot resume into the folder; a folder of the user's is refused before any work
    with pytest.raises(InputError, match="--resume"):
        images.run(out, data, replace(SETTINGS, steps=100), networks=("mlp",), seeds=(0,), methods=METHODS,
                   resume=True)
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("the user's")
    with pytest.raises(FolderNotOwnedError, match="notes.txt"):
        images.main(out=str(mine), networks=("mlp",), seeds=(0,), methods=("map",), quick=True)
    assert sorted(p.name for p in mine.iterdir()) == ["notes.txt"]


def test_request_checked_before_work():
    with pytest.raises(InputError, match="--methods"):
        images.check_request(None, None, ("map", "nope"))
    with pytest.raises(InputError, match="--seeds"):
        images.check_request(None, (0, 0), None)
    assert images.check_request(("mlp",), (1,), ("mean_field",)) == (("mlp",), (1,), ("map", "mean_field"))


def test_command_line_refuses_another_suites_options_and_a_foreign_folder(tmp_path, capsys):
    from zoo.cli import EXIT_USAGE, main

    assert main(["benchmark", "images", "--data-dir", str(tmp_path)]) == EXIT_USAGE
    assert "--data-dir" in capsys.readouterr().err
    assert main(["benchmark", "uci", "--networks", "mlp"]) == EXIT_USAGE
    assert "--networks" in capsys.readouterr().err
    (tmp_path / "mine.txt").write_text("the user's")
    assert main(["benchmark", "images", "--quick", "--methods", "map", "--out", str(tmp_path)]) == EXIT_USAGE
    assert "mine.txt" in capsys.readouterr().err and sorted(p.name for p in tmp_path.iterdir()) == ["mine.txt"]


def test_goal_checked_row_by_row_on_a_known_table():
    from zoo.experiments.benchmarks.images_report import ensemble_distance, goal_checks, goal_text

    rows = []
    for seed in (0, 1):  # per method: nll, ece, cnll, cpu_s (map's cpu 10)
        for method, (nll, ece, cnll, cpu) in {"map": (0.30, 0.05, 1.0, 10), "map_temperature": (0.25, 0.03, 1.1, 11),
                                              "ensemble": (0.20, 0.02, 0.8, 50), "mean_field": (0.24, 0.03, 0.9, 30),
                                              "ivon": (0.244, 0.02, 0.95, 14), "laplace_kfac": (0.22, 0.02, 0.9, 16),
                                              "laplace_last_layer": (0.24, 0.04, 0.9, 12)}.items():
            rows.append({"network": "mlp", "seed": seed, "method": method, "accuracy": 0.9, "nll": nll + seed / 100,
                         "ece": ece, "cal_nll": nll, "cal_ece": ece, "cnll": cnll, "cece": 0.1, "cpu_s": cpu,
                         "cpu_vs_map": cpu / 10})
    checks = goal_checks(pd.DataFrame(rows)).set_index("check")
    verdicts = {c[:6] + " " + c.split(": ")[1].split(" ")[0]: v for c, v in checks.verdict.items()}
    # kfac: 1.6 x map's cost > 1.5 (not met); last layer: ECE 0.04 >= 0.03; ivon: 1.4 x, 0.025 < 0.035 (NLL), 0.02
    # < 0.03 (ECE), 0.95 < 1.0 (cNLL): met. Goal 2: ivon's NLL 0.249 <= 0.245 + 0.005 and 14 <= 0.5 x 30: met
    assert verdicts == {"goal 1 laplace_last_layer": "not met", "goal 1 laplace_kfac": "not met",
                        "goal 1 laplace_last_layer_val": "not measured", "goal 1 laplace_kfac_val": "not measured",
                        "goal 1 ivon": "met", "goal 1 ivon_half": "not measured", "goal 2 ivon's": "met",
                        "goal 2 ivon_half's": "not measured"}
    text = goal_text(pd.DataFrame(rows))
    assert "- mlp, goal 1: met by ivon (seeds per row: 2, 2, 0, 0, 2, 0;" in text and "- mlp, goal 2: met by ivon " in text
    assert checks.numbers.iloc[1].startswith("cost 1.6000 >= 1.5000 (x map); NLL 0.2250 < 0.2550 (map_temperature)")
    text = ensemble_distance(pd.DataFrame(rows))
    assert "| mlp | map | 2 | 0.100 +- 0.000 | 0.030 +- 0.000 | 0.200 +- 0.000 | 0.20 +- 0.00 |" in text
