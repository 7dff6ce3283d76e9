"""benchmarks/gpu_steps.py's table: the ratios, steps per second and files it writes, from given times."""

import csv
import importlib
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"


@pytest.fixture(scope="module")
def gpu_steps():
    sys.path.insert(0, str(BENCHMARKS))
    try:
        yield importlib.import_module("gpu_steps")
    finally:
        sys.path.remove(str(BENCHMARKS))


def test_table_ratios_are_medians_of_per_round_ratios_and_files_hold_them(gpu_steps, tmp_path):
    bench = gpu_steps.Bench("MLP", "mlp", {}, (4,), 10, 2, 5)
    times = {  # {row: [(wall ms, CPU ms) per round]}: the CPU column must not be read
        "deterministic": [(1.0, 9.0), (2.0, 9.0), (4.0, 9.0)],
        "MF": [(3.0, 1.0), (2.0, 1.0), (20.0, 1.0)],  # per-round ratios 3, 1, 5
        "deterministic B*4": [(2.0, 1.0), (4.0, 1.0), (8.0, 1.0)],
        "rank-1 K=4": [(3.0, 1.0), (4.0, 1.0), (16.0, 1.0)],  # to det: 3, 2, 4; to det B*4: 1.5, 1, 2
    }
    rows = gpu_steps.table_rows(bench, times)
    got = {(r["row"], r["ratio_to"]): r for r in rows}
    assert len(rows) == 5
    assert got[("deterministic", "")]["ratio"] is None
    assert got[("deterministic", "")]["ms_per_step"] == 2.0 and got[("deterministic", "")]["steps_per_s"] == 500.0
    mf = got[("MF", "deterministic")]
    assert (mf["ratio"], mf["ratio_min"], mf["ratio_max"]) == (3.0, 1.0, 5.0)
    assert (mf["ms_per_step"], mf["ms_min"], mf["ms_max"]) == (3.0, 2.0, 20.0)
    assert got[("rank-1 K=4", "deterministic")]["ratio"] == 3.0
    r1 = got[("rank-1 K=4", "deterministic B*4")]
    assert (r1["ratio"], r1["ratio_min"], r1["ratio_max"]) == (1.5, 1.0, 2.0)

    gpu_steps.write(str(tmp_path), rows, ["a note"], "gpu H100", 3)
    md = (tmp_path / "gpu_steps.md").read_text()
    assert "| MLP | 2 | MF | 3.000 [2.000-20.000] | 333.3 | 3.00 [1.00-5.00] | deterministic |" in md
    assert md.rstrip().endswith("a note") and "gpu H100" in md
    with open(tmp_path / "gpu_steps.csv") as f:
        table = list(csv.DictReader(f))
    assert [r["row"] for r in table] == [r["row"] for r in rows]
    assert float(table[4]["ratio"]) == 1.5 and table[4]["ratio_to"] == "deterministic B*4"
