"""Importing the experiments' analyses and drawing their figures leaves matplotlib's backend alone (no import-time
global state), as evals does (tests/evals/test_plot_backend.py)."""

import textwrap

SCRIPT = textwrap.dedent("""
    import os, sys
    import numpy as np
    import pandas as pd

    import zoo.experiments.analysis
    from zoo.experiments.analysis import depth_sweep, product_covariance

    import matplotlib
    assert matplotlib.get_backend() == "svg", matplotlib.get_backend()

    out = sys.argv[1]
    summary = pd.DataFrame({"activation": ["relu"] * 2, "depth": [1, 2], "kl_diag_full_mean": [2.0, 1.0],
                            "kl_diag_full_se": [0.1, 0.1]})
    depth_sweep.plot_depth_sweep(summary, metrics=("kl_diag_full",)).savefig(os.path.join(out, "fig2.png"))
    product_covariance.plot_covariance_heatmaps({"L = 1": np.eye(4)}).savefig(os.path.join(out, "fig1.png"))

    print(matplotlib.get_backend(), "matplotlib.pyplot" in sys.modules)
""")


def test_the_analyses_and_their_figures_leave_the_matplotlib_backend_unchanged(figures_in_a_fresh_process):
    assert figures_in_a_fresh_process(SCRIPT) == ["fig1.png", "fig2.png"]
