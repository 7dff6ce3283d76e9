"""The UCI regression layout (`zoo.data.uci`) and `zoo benchmark uci`, on a tiny data set generated in that
layout: standardisation by the training split, the test log-likelihood in original units against a hand
computation, one method end to end on one split, and the CLI's errors (one line naming the file or name)."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
from scipy.stats import norm

import zoo
from base.errors import InputError
from zoo.experiments.benchmarks.uci import QUICK, Fitted, run, scores
from zoo.cli import EXIT_USAGE, main
from zoo.data.uci import SHIPPED, available, num_splits, original_units, uci


def write_layout(root, name="tiny", rows=60, seed=0):
    """A data set folder in the standard layout: 3 columns (x0, x1, y = 3 + 2 x0 + noise), 2 splits of 48/12
    rows; the target is the LAST column but not listed last among the features (column order as written)."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(rows, 2)) * [2.0, 5.0] + [1.0, -4.0]
    y = 3.0 + 2.0 * x[:, 0] + 0.1 * rng.normal(size=rows)
    folder = root / name
    folder.mkdir(parents=True)
    np.savetxt(folder / "data.txt", np.column_stack([x, y]))
    (folder / "index_features.txt").write_text("0\n1\n")
    (folder / "index_target.txt").write_text("2\n")
    for k in range(2):
        perm = np.random.default_rng(100 + k).permutation(rows)
        np.savetxt(folder / f"index_train_{k}.txt", perm[:48], fmt="%d")
        np.savetxt(folder / f"index_test_{k}.txt", perm[48:], fmt="%d")
    return folder, x, y


def test_loader_standardises_by_the_training_split(tmp_path):
    folder, x, y = write_layout(tmp_path)
    train_rows = np.loadtxt(folder / "index_train_1.txt", dtype=int)
    test_rows = np.loadtxt(folder / "index_test_1.txt", dtype=int)
    train, test = uci("tiny", 1, root=str(tmp_path))
    mu, sd = x[train_rows].mean(0), x[train_rows].std(0)
    np.testing.assert_allclose(train.x, (x[train_rows] - mu) / sd, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(test.x, (x[test_rows] - mu) / sd, rtol=1e-5, atol=1e-6)  # the TRAINING constants
    assert train.y_mean == pytest.approx(y[train_rows].mean()) and train.y_sd == pytest.approx(y[train_rows].std())
    np.testing.assert_allclose(test.y, (y[test_rows] - train.y_mean) / train.y_sd, rtol=1e-5, atol=1e-6)
    assert (test.y_mean, test.y_sd) == (train.y_mean, train.y_sd)
    assert num_splits("tiny", str(tmp_path)) == 2 and available(str(tmp_path)) == ["tiny"]


def test_original_unit_log_likelihood_matches_a_hand_computation(tmp_path):
    write_layout(tmp_path)
    train, test = uci("tiny", 0, root=str(tmp_path))
    rng = np.random.default_rng(1)
    f = rng.normal(size=(4, len(test))) * 0.1 + test.y  # 4 draws of the output (standardised units)
    sigma = np.array([0.1, 0.2, 0.15, 0.3])
    ll = norm.logpdf(test.y, f, sigma[:, None])
    got = scores(Fitted(f, ll, 0.0), test.y, train.y_sd)
    y_orig = train.y_mean + train.y_sd * test.y  # by hand: the mixture density of the original targets
    dens = norm.pdf(y_orig, train.y_mean + train.y_sd * f, train.y_sd * sigma[:, None]).mean(0)
    assert got["test_ll"] == pytest.approx(np.log(dens).mean(), rel=1e-6)  # float32 targets
    assert got["rmse"] == pytest.approx(np.sqrt(np.mean((train.y_sd * (f.mean(0) - test.y)) ** 2)), rel=1e-6)
    assert original_units(-1.0, 2.0, np.e) == (-2.0, 2.0 * np.e)


def test_the_shipped_sets_load_through_zoo_get():
    assert set(SHIPPED) <= set(available())
    entry = zoo.get("mlp", data=("uci", {"name": "yacht", "split": 19}), hidden=(50,), noise=None)
    assert entry.train.x.shape == (277, 6) and entry.test.x.shape == (31, 6)
    assert entry.config["data"] == "uci" and entry.config["data_kwargs"] == {"name": "yacht", "split": 19}
    assert "likelihood/noise" in entry.model.site_shapes((6,))
    assert entry.num_weights() == 6 * 50 + 50 + 50 + 1 + 1


@pytest.mark.parametrize("edit, says", [
    (lambda f: (f / "data.txt").write_text("1 2 x\n"), "data.txt"),
    (lambda f: (f / "index_target.txt").unlink(), "index_target.txt: expected a file of the UCI layout, got <no such file>"),
    (lambda f: (f / "index_test_0.txt").write_text("0\n99\n"), "index_test_0.txt"),
    (lambda f: (f / "index_features.txt").write_text("0\n2\n"), "without the target column 2"),
])
def test_a_malformed_file_is_named(tmp_path, edit, says):
    folder, _, _ = write_layout(tmp_path)
    edit(folder)
    with pytest.raises(InputError, match=says.replace(".", r"\.")):
        uci("tiny", 0, root=str(tmp_path))


def test_one_method_end_to_end_on_one_split(tmp_path):
    write_layout(tmp_path / "data")
    settings = replace(QUICK, splits=1, svi_steps=300, num_samples=50)
    table = run(tmp_path / "out", settings, ["tiny"], ("mean_field",), root=str(tmp_path / "data"), log=lambda s: None)
    saved = pd.read_csv(tmp_path / "out" / "uci.csv")
    assert list(saved.method) == ["mean_field"] and saved.split.tolist() == [0]
    train, test = uci("tiny", 0, root=str(tmp_path / "data"))
    # the training mean as a Normal predictive of the training sd scores about -1.4 - log(sd) per point; the
    # fitted line (noise 0.1 in original units) must do far better
    baseline = norm.logpdf(test.y * train.y_sd, 0.0, train.y_sd).mean()
    assert table.test_ll[0] > baseline + 1.0 and table.rmse[0] < 0.5
    assert (tmp_path / "out" / "summary.md").read_text().count("| tiny | mean_field | 1 |") == 1
    assert (tmp_path / "out" / "uci.png").stat().st_size > 10_000
    page = (tmp_path / "out" / "report.html").read_text()  # zoo report's page of the folder, written at the end
    assert "<h3>uci.csv</h3>" in page and page.count('<img src="data:image/png;base64,') >= 1


@pytest.mark.parametrize("args, says", [
    (["--data-dir", "{tmp}/nowhere"], "--data-dir: expected a folder holding UCI data set folders"),
    (["--data-dir", "{tmp}", "--datasets", "tiny,nope"], "--datasets: expected data set folders among ['tiny']"),
    (["--data-dir", "{tmp}", "--methods", "map,magic"], "--methods: expected methods among"),
    (["--datasets", "bostonHousing"], "--datasets: expected data set folders among"),
    (["--data-dir", "{tmp}", "--datasets", "tiny,tiny"], "--datasets: expected each data set named once, got "
                                                         "'tiny,tiny'; tiny repeated"),
    (["--data-dir", "{tmp}", "--splits", "10"], "--splits: expected at most 2: tiny has 2 splits"),
    (["--data-dir", "{tmp}", "--methods", "map,map"], "--methods: expected each method named once"),
])
def test_cli_errors_are_one_line(tmp_path, capsys, args, says):
    write_layout(tmp_path)
    argv = ["benchmark", "uci", "--out", str(tmp_path / "out")] + [a.format(tmp=tmp_path) for a in args]
    assert main(argv) == EXIT_USAGE
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("zoo benchmark: error: ") and says in lines[0], lines
    assert not (tmp_path / "out").exists()


def test_cli_names_a_malformed_file(tmp_path, capsys):
    folder, _, _ = write_layout(tmp_path)
    (folder / "index_train_0.txt").write_text("0 1\n2.5 3\n")
    assert main(["benchmark", "uci", "--data-dir", str(tmp_path), "--out", str(tmp_path / "out")]) == EXIT_USAGE
    line = capsys.readouterr().err.strip()
    assert "\n" not in line and str(folder / "index_train_0.txt") in line


def test_cli_usage_errors(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["benchmark", "uci", "--hidden-layers", "3"])
    assert exit_.value.code == EXIT_USAGE
    assert "argument --hidden-layers: expected 1, 2 or 1,2" in capsys.readouterr().err


def test_every_split_is_checked_before_any_fit(tmp_path, capsys):
    folder, _, _ = write_layout(tmp_path)
    (folder / "index_test_1.txt").write_text("0\n999\n")  # split 1 broken: refused before split 0 is fitted
    argv = ["benchmark", "uci", "--data-dir", str(tmp_path), "--splits", "2", "--out", str(tmp_path / "out")]
    assert main(argv) == EXIT_USAGE
    assert str(folder / "index_test_1.txt") in capsys.readouterr().err and not (tmp_path / "out").exists()


def _earlier_run(folder):
    from zoo.experiments.benchmarks.uci_folder import marker

    folder.mkdir()
    (folder / "run.json").write_text(json.dumps(marker({}, ["map"], 1.0)))
    (folder / "uci.csv").write_text("dataset,split,hidden_layers,method\n")


def _saved_posterior(folder):
    folder.mkdir()
    (folder / "MANIFEST.json").write_text(json.dumps({"writer": "bnn-zoo", "kind": "posterior",
                                                      "files": {"posterior.json": {}, "arrays.npz": {}}}))
    (folder / "posterior.json").write_text("{}")
    (folder / "arrays.npz").write_bytes(b"")


@pytest.mark.parametrize("make, inside, says", [
    (lambda p: p.write_text("mine"), "", "--out: expected a folder for the benchmark's results, got '{out}'; it is "
                                         "an existing file"),
    (lambda p: (p.mkdir(), (p / "summary.md").write_text("my notes"), (p / "uci.csv").write_text("mine")), "",
     "--out: expected a new or empty folder, or the run folder of an earlier zoo benchmark uci, got '{out}'; it "
     "holds files the benchmark did not write (summary.md, uci.csv)"),
    (_saved_posterior, "", "it holds files the benchmark did not write (MANIFEST.json, arrays.npz, posterior.json)"),
    (_saved_posterior, "run", "--out: expected a folder outside bnn-zoo's own folders, got '{out}'; it would be "
                              "made inside {folder}, a posterior folder"),
    (_earlier_run, "", "--out: expected a new or empty folder, got '{out}'; it holds an earlier run of zoo "
                       "benchmark uci: pass --resume"),
])
def test_out_is_new_empty_or_the_benchmarks_own(tmp_path, capsys, make, inside, says):
    write_layout(tmp_path / "data")
    folder = tmp_path / "out"
    make(folder)
    out = folder / inside if inside else folder
    before = {p.name: p.read_bytes() for p in folder.iterdir()} if folder.is_dir() else folder.read_bytes()
    argv = ["benchmark", "uci", "--data-dir", str(tmp_path / "data"), "--methods", "map", "--out", str(out)]
    assert main(argv) == EXIT_USAGE
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(lines) == 1 and says.format(out=out, folder=folder) in lines[0], lines
    assert before == ({p.name: p.read_bytes() for p in folder.iterdir()} if folder.is_dir() else folder.read_bytes())


def test_a_resumed_run_gives_the_uninterrupted_runs_rows(tmp_path):
    """A run killed between two splits (simulated: the log callback raises when the second split starts) and
    resumed with --resume writes the same uci.csv rows as one uninterrupted run (seconds aside)."""
    from zoo.experiments.benchmarks.uci import main as benchmark

    write_layout(tmp_path / "data")
    settings = dict(data_dir=str(tmp_path / "data"), splits=2, methods=["map", "mean_field"], quick=True)
    tiny = replace(QUICK, svi_steps=50, num_samples=10)

    def killed(line):
        if line.startswith("[2/2]"):
            raise KeyboardInterrupt

    import zoo.experiments.benchmarks.uci as uci_module
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(uci_module, "QUICK", tiny)
        whole = benchmark(out=str(tmp_path / "whole"), log=lambda s: None, **settings)
        with pytest.raises(KeyboardInterrupt):
            benchmark(out=str(tmp_path / "piece"), log=killed, **settings)
        assert len(pd.read_csv(tmp_path / "piece" / "uci.csv")) == 2  # split 0's two rows were written
        said = []
        resumed = benchmark(out=str(tmp_path / "piece"), resume=True, log=said.append, **settings)
    assert any("1 of 2 splits already finished" in line for line in said)
    assert sum(line.startswith("[") for line in said) == 1  # only split 1 was fitted again
    a, b = (pd.read_csv(tmp_path / d / "uci.csv").drop(columns="seconds") for d in ("whole", "piece"))
    pd.testing.assert_frame_equal(a, b)
    assert len(a) == 4 and np.isfinite(a.test_ll).all() and len(resumed) == len(whole) == 4


def test_the_leaderboard_gives_t_intervals_over_converged_splits():
    from scipy import stats

    from zoo.experiments.benchmarks.uci_report import closest_table, interval

    rng = np.random.default_rng(0)
    rows = []
    for split in range(4):
        for method, w2 in (("map", 0.5), ("mean_field", 0.2), ("nuts", np.nan)):
            rows.append({"hidden_layers": 1, "dataset": "tiny", "split": split, "method": method,
                         "ll_gap": np.nan if method == "nuts" else rng.normal(), "rmse_gap": rng.normal(),
                         "mean_abs_z": rng.random() + (method == "map"), "sd_ratio": rng.random(),
                         "w2": w2 + 0.01 * split, "nuts_converged": split != 3})  # split 3: not converged
    table = pd.DataFrame(rows)
    gaps = table[(table.method == "map") & table.nuts_converged].ll_gap
    mean, lo, hi = interval(gaps)
    assert (lo, hi) == pytest.approx(stats.t.interval(0.95, len(gaps) - 1, loc=gaps.mean(), scale=stats.sem(gaps)))
    text = closest_table(table)
    assert f"| 1 | tiny | 2 | map | 3 | {mean:.3f} [{lo:.3f}, {hi:.3f}] |" in text  # ranked by mean |z|: 2nd
    assert "closest to NUTS's predictive is mean_field (mean W2 0.21" in text
