"""Importing evals and drawing its figures leaves matplotlib's backend alone (no import-time global state)."""

import textwrap

SCRIPT = textwrap.dedent("""
    import os, sys
    import numpy as np

    import evals
    from evals import corruption_grid, ood, plots

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

    print(matplotlib.get_backend(), "matplotlib.pyplot" in sys.modules)
""")


def test_evals_and_its_figures_leave_the_matplotlib_backend_unchanged(figures_in_a_fresh_process):
    assert figures_in_a_fresh_process(SCRIPT) == sorted(["rel.png", "loss.png", "map.png", "severity.png", "grid.png"])
