"""How spread out a posterior is, per sample site (per layer's weights and biases): the marginal standard deviations
of its draws, summarised per site, and their plot. A site whose sds stayed at the guide's initial scale, or sit at
the prior's, is a site the data did not inform (posterior collapse shows here first).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from base.errors import InputError


def site_spread(draws: dict) -> pd.DataFrame:
    """One row per site of `draws` {site: (chains, draws, *shape)} (`evals.comparison.chain_draws`): entries, and the
    mean, median, smallest and largest marginal sd of its entries (over all chains and draws, ddof 1), and the
    mean |mean| of the entries (for scale). Index named "site"."""
    rows = {}
    for site, value in draws.items():
        a = np.asarray(value, np.float64)
        if a.ndim < 2 or a.shape[0] * a.shape[1] < 2:
            raise InputError("draws", f"<{site!r} of shape {a.shape}>", "(chains, draws, ...) with 2 or more draws")
        flat = a.reshape(a.shape[0] * a.shape[1], -1)
        sd = flat.std(0, ddof=1)
        rows[site] = {"entries": flat.shape[1], "sd_mean": float(sd.mean()), "sd_median": float(np.median(sd)),
                      "sd_min": float(sd.min()), "sd_max": float(sd.max()),
                      "abs_mean": float(np.abs(flat.mean(0)).mean())}
    return pd.DataFrame.from_dict(rows, orient="index").rename_axis("site")


def plot_site_spread(draws: dict, path, title: str = "posterior sd per site"):
    """Box plots of the marginal sds of every site's entries (log axis), one box per site in the order of `draws`.
    Writes a PNG to `path` (a file name or a binary file object) and returns it."""
    from matplotlib.figure import Figure

    sds = [np.asarray(v, np.float64).reshape(-1, int(np.prod(np.shape(v)[2:], dtype=int))).std(0, ddof=1)
           for v in draws.values()]
    fig = Figure(figsize=(max(4.0, 0.9 * len(sds) + 1.5), 3.2))
    ax = fig.subplots()
    ax.boxplot(sds, showfliers=False)
    ax.set_xticks(range(1, len(sds) + 1), list(draws), rotation=30, ha="right", fontsize=7)
    if all(np.all(s > 0) for s in sds):
        ax.set_yscale("log")
    ax.set_ylabel("marginal sd")
    ax.set_title(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, format="png", dpi=100)
    return path
