"""Plots of scores: reliability diagrams, loss curves, predictive maps, written to PNG files.

Figures are built with matplotlib's object API (``matplotlib.figure.Figure``), which needs no pyplot, so
writing them never selects or changes the matplotlib backend (a notebook keeps its own).
"""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure

from evals import metrics


def reliability_diagram(probs_by_name: dict, y, path: str, num_bins: int = 15, title: str = "") -> str:
    """Accuracy vs confidence per bin, one panel per posterior, with ECE in each title.

    probs_by_name: {label: averaged probabilities (N, C)}; y: (N,). Writes a PNG to `path`.
    """
    n = len(probs_by_name)
    fig = Figure(figsize=(3.2 * n, 3.2))
    axes = fig.subplots(1, n, squeeze=False)
    for ax, (label, probs) in zip(axes[0], probs_by_name.items()):
        centres, acc, conf, counts = metrics.reliability(probs, y, num_bins)
        width = 1.0 / num_bins
        ax.bar(centres, np.nan_to_num(acc), width=width, edgecolor="k", alpha=0.7, label="accuracy")
        ax.plot([0, 1], [0, 1], "k--", lw=1)
        ax.set_title(f"{label}\nECE {metrics.ece(probs, y, num_bins):.3f}", fontsize=9)
        ax.set_xlabel("confidence")
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1)
    axes[0][0].set_ylabel("accuracy")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return path


def loss_curve(losses: np.ndarray, path: str, title: str = "SVI loss") -> str:
    """The negative ELBO per step (log scale when positive) to a PNG at `path`."""
    fig = Figure(figsize=(5, 3))
    ax = fig.subplots()
    ax.plot(np.asarray(losses), lw=0.8)
    if np.all(np.asarray(losses) > 0):
        ax.set_yscale("log")
    ax.set_xlabel("step")
    ax.set_ylabel("-ELBO")
    ax.set_title(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return path


def predictive_map(predict_by_name: dict, x, y, path: str, resolution: int = 80) -> str:
    """p(y = 1 | x) over the plane for 2-D binary problems, one panel per posterior, data overlaid.

    predict_by_name: {label: callable grid (G, 2) -> probabilities (G, 2)}; x (N, 2), y (N,).
    """
    x = np.asarray(x)
    lo, hi = x.min(0) - 0.5, x.max(0) + 0.5
    g0, g1 = np.meshgrid(np.linspace(lo[0], hi[0], resolution), np.linspace(lo[1], hi[1], resolution))
    grid = np.stack([g0.ravel(), g1.ravel()], -1).astype(np.float32)
    n = len(predict_by_name)
    fig = Figure(figsize=(3.6 * n, 3.2))
    axes = fig.subplots(1, n, squeeze=False)
    for ax, (label, predict) in zip(axes[0], predict_by_name.items()):
        p1 = np.asarray(predict(grid))[:, 1].reshape(g0.shape)
        im = ax.contourf(g0, g1, p1, levels=np.linspace(0, 1, 11), cmap="RdBu_r", alpha=0.8)
        ax.scatter(x[:, 0], x[:, 1], c=y, s=3, cmap="RdBu_r", edgecolors="none")
        ax.set_title(label, fontsize=9)
    fig.colorbar(im, ax=axes[0].tolist(), shrink=0.8, label="p(y=1|x)")
    fig.savefig(path, dpi=110)
    return path
