"""Importing evals and drawing its figures leaves matplotlib's backend alone (no import-time global state)."""

import os
import subprocess
import sys
import textwrap

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

SCRIPT = textwrap.dedent("""
    import os, sys
    import numpy as np
    import pandas as pd

    import evals
    from evals import corruption_grid, depth_sweep, ood, plots, product_covariance

    import matplotlib
    assert matplotlib.get_backend() == "svg", matplotlib.get_backend()

    out = sys.argv[1]
    rng = np.random.default_rng(0)
    probs = rng.dirichlet(np.ones(3), size=20)
    y = rng.integers(0, 3, size=20)
    plots.reliability_diagram({"a": probs}, y, os.path.join(out, "rel.png"))
    plots.loss_curve(np.linspace(10, 1, 50), os.path.join(out, "loss.png"))
    plots.predictive_map({"a": lambda g: np.stack([1 - 1 / (1 + np.exp(-g[:, 0])), 1 / (1 + np.exp(-g[:, 0]))], -1)},
                         rng.normal(size=(10, 2)), rng.integers(0, 2, size=10), os.path.join(out, "map.png"), resolution=8)
    results = ood.score({"point_estimate": lambda x: np.full((len(x), 3), 1 / 3)},
                        type("T", (), {"x": rng.uniform(size=(4, 8, 8, 1)).astype(np.float32), "y": y[:4]})(),
                        types=["gaussian_noise"], severities=(1, 2))
    ood.plot_severity(results, os.path.join(out, "severity.png"))
    corruption_grid.plot_corruption_grid(rng.uniform(size=(8, 8)), os.path.join(out, "grid.png"), kinds=("contrast",))
    summary = pd.DataFrame({"activation": ["relu"] * 2, "depth": [1, 2], "kl_diag_full_mean": [2.0, 1.0],
                            "kl_diag_full_se": [0.1, 0.1]})
    depth_sweep.plot_depth_sweep(summary, metrics=("kl_diag_full",)).savefig(os.path.join(out, "fig2.png"))
    product_covariance.plot_covariance_heatmaps({"L = 1": np.eye(4)}).savefig(os.path.join(out, "fig1.png"))

    print(matplotlib.get_backend(), "matplotlib.pyplot" in sys.modules)
""")


def test_evals_and_its_figures_leave_the_matplotlib_backend_unchanged(tmp_path):
    env = {**os.environ, "MPLBACKEND": "svg", "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path)], env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["svg", "False"]  # the backend set by the user; pyplot never imported
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["rel.png", "loss.png", "map.png", "severity.png", "grid.png", "fig2.png", "fig1.png"])
