"""`zoo reproduce k-tied`: one tiny end-to-end run of the job (every table, figure and verdict row) and the
CLI wiring; the analyses' numbers are tested in tests/evals/test_{sigma_spectrum,rank_truncation,gradient_snr}.py."""

from dataclasses import replace

import pytest

from zoo.reproduce.k_tied import QUICK, reproduce_k_tied
from zoo.reproduce.report import VERDICTS

TINY = replace(
    QUICK, seeds=(0,), mlp=("mlp", "two_moons", {"hidden": (4, 3)}, 0.2), others=(), checkpoints=(20, 40),
    chunk_size=20, batch_size=16, snr_batches=3, val_draws=3, eval_draws=4, ranks=(1,), trace_ks=(None, 2),
    speed=None,
    data_kwargs={"two_moons": {"n": 100}}, notes=("tiny test settings",),
)


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("k_tied")
    return out, reproduce_k_tied(out, "quick", log=None, config=TINY)


def test_the_job_writes_every_table_figure_and_a_verdict_per_finding(tiny_run):
    out, result = tiny_run
    for name in ("trace.csv", "trace_summary.csv", "final_scores.csv", "spectra.csv", "truncation.csv",
                 "fig3_spectra.png", "fig6_snr_elbo.png", "report.md"):
        assert (out / name).exists(), name
    text = (out / "report.md").read_text()
    claims = ["gradient SNR", "converges at least as fast", "low-rank", "truncation loses nothing", "no slower"]
    for claim in claims:
        line = next(l for l in text.splitlines() if claim in l and l.startswith("|"))
        assert any(f"| {v} |" in line for v in VERDICTS), line
    trace = result["trace"]
    assert len(trace) == 2 * 2 and set(trace["step"]) == {20, 40}  # mean field and 2-tied at two checkpoints
    assert (trace["snr"] >= 1).all() and trace["val_neg_elbo"].notna().all()
    trunc = result["truncation"]
    assert list(trunc["rank"]) == [1, "full"] and (trunc["params"].iloc[0] < trunc["params"].iloc[1])
    assert "| A k-tied step is no slower (Table 4) | not run |" in text  # speed=None


def test_cli_runs_the_k_tied_job_with_its_options(monkeypatch, tmp_path):
    import zoo.reproduce.k_tied as job
    from zoo.cli import main

    calls = []
    monkeypatch.setattr(job, "reproduce_k_tied", lambda *args, **kwargs: calls.append((args, kwargs)))
    assert main(["reproduce", "k-tied", "--out", str(tmp_path), "--seeds", "0,1", "--data-dir", "/data"]) == 0
    assert calls == [((str(tmp_path), "quick"), {"seeds": (0, 1), "data_dir": "/data"})]


def test_verdict_rules_on_constructed_tables():
    import pandas as pd

    from zoo.reproduce import k_tied_findings as f

    rows = []
    for k, snr, elbo in (("mean field", 4.0, 2.0), (1, 50.0, 1.5), (2, 60.0, 1.4), (3, 55.0, 1.45)):
        for step in (100, 200):
            rows.append({"k": k, "step": step, "snr_median_mean": snr, "snr_median_se": 1.0, "val_neg_elbo_mean": elbo,
                         "val_neg_elbo_se": 0.01})
    summary = pd.DataFrame(rows)
    assert f.snr_verdict(summary)[0] == "reproduces"
    assert f.convergence_verdict(summary)[0] == "reproduces"
    worse = summary.assign(val_neg_elbo_mean=[2.0, 2.0, 1.5, 1.5, 2.5, 2.5, 2.5, 2.5])
    assert f.convergence_verdict(worse)[0] == "does not reproduce"
    spectra = pd.DataFrame({"model": ["MLP"] * 2, "sigma_top1": [0.9, 0.95], "sigma_top2": [0.97, 0.99],
                            "mean_top1": [0.2, 0.3], "mean_top2": [0.35, 0.4]})
    assert f.sigma_low_rank(spectra)[0] == "reproduces"
    assert f.sigma_low_rank(spectra.assign(sigma_top2=[0.5, 0.6]))[0] == "does not reproduce"
    base = {"model": "MLP", "seed": 0, "accuracy_sem": 0.01, "nll_sem": 0.01}
    trunc = pd.DataFrame([{**base, "rank": "full", "nll": 0.20, "accuracy": 0.95},
                          {**base, "rank": 2, "nll": 0.21, "accuracy": 0.95},
                          {**base, "rank": 1, "nll": 0.40, "accuracy": 0.90}])
    assert f.truncation_verdict(trunc)[0] == "reproduces"
    times = pd.DataFrame({"round": [0, 0, 1, 1], "k": ["mean field", 2, "mean field", 2], "ms": [2.0, 1.8, 2.2, 2.0]})
    verdict, evidence = f.step_time_verdict(times)
    assert verdict == "reproduces" and "ratio" in evidence
