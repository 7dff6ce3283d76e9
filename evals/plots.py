"""Plots of scores: reliability diagrams, loss curves, predictive maps, curves of several metrics, written to PNG
files. Many panels are laid out in a grid (at most `MAX_COLUMNS` a row), and lines in one panel differ in colour,
marker and line style (`line_styles`), so that a figure stays readable at its saved size.

Figures are built with matplotlib's object API (``matplotlib.figure.Figure``), which needs no pyplot, so
writing them never selects or changes the matplotlib backend (a notebook keeps its own).
"""

from __future__ import annotations

import numpy as np
from matplotlib import colormaps
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

from evals import metrics

MAX_COLUMNS = 4  # panels per row of a figure's grid
_MARKERS = ("o", "s", "^", "v", "D", "P", "X", "*", "h", "<")
_LINESTYLES = ("-", "--", ":", "-.")


def _panel_grid(num_panels: int, size: tuple, columns: int = MAX_COLUMNS):
    """(Figure, [Axes] of `num_panels` cells in reading order): a grid of at most `columns` a row, each cell
    `size` inches (width, height); cells past `num_panels` are hidden."""
    cols = max(1, min(columns, num_panels))
    rows = -(-num_panels // cols)
    fig = Figure(figsize=(size[0] * cols, size[1] * rows))
    axes = list(fig.subplots(rows, cols, squeeze=False).ravel())
    for ax in axes[num_panels:]:
        ax.set_axis_off()
    return fig, axes[:num_panels]


def line_styles(n: int) -> list:
    """`n` matplotlib line styles ({"color", "marker", "linestyle"}) for the lines of one panel: up to 20 lines
    no two share a colour (tab20's dark shades, solid, then its light shades, dashed), and next to the colour the
    marker and the line style tell lines apart; past 20 colours come back with other markers and line styles (no
    two of the first 200 lines alike)."""
    shades = colormaps["tab20"]  # 20 colours, called with an integer index: 2j dark, 2j + 1 light
    styles = []
    for i in range(n):
        lap, j = divmod(i, 10)
        styles.append({"color": shades(2 * j + lap % 2), "marker": _MARKERS[(j + 3 * lap) % len(_MARKERS)],
                       "linestyle": _LINESTYLES[lap % len(_LINESTYLES)]})
    return styles


def metric_panels(curves: dict, path: str, xlabel: str, title: str = "", panel_size=(3.2, 2.6),
                  log_panels=()) -> str:
    """One panel per metric, one line per label in each, in a grid (`MAX_COLUMNS` a row) with the legend in a
    cell of its own (`line_styles`: a label keeps its style in every panel).

    curves: {panel title: {line label: (x (K,), y (K,))}}; a label may be missing from a panel. log_panels: titles
    of panels drawn with a log y axis (where all their values are positive). Writes a PNG to `path` and returns it.
    """
    labels = list(dict.fromkeys(label for lines in curves.values() for label in lines))
    style = dict(zip(labels, line_styles(len(labels))))
    fig, axes = _panel_grid(len(curves) + 1, panel_size)
    for ax, (name, lines) in zip(axes, curves.items()):
        for label, (x, y) in lines.items():
            ax.plot(x, y, label=label, lw=1.2, markersize=4, **style[label])
        if name in log_panels and all(np.all(np.asarray(y) > 0) for _, y in lines.values()):
            ax.set_yscale("log")  # ticks at 1, 2, 5 x 10^k, written as plain numbers
            ax.yaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
            ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
            ax.yaxis.set_minor_formatter(NullFormatter())
        ax.set_title(name, fontsize=10)
        ax.set_xlabel(xlabel, fontsize=9)
        ax.tick_params(labelsize=8)
        ax.grid(alpha=0.3)
    legend = axes[-1]
    legend.set_axis_off()
    rows = max(1, int(panel_size[1] / 0.16))  # legend entries of 7-point text that fit a cell's height
    legend.legend([Line2D([], [], lw=1.2, markersize=4, **style[label]) for label in labels], labels, loc="center",
                  fontsize=7, frameon=False, ncol=-(-len(labels) // rows), handlelength=2.5, columnspacing=0.8)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return path


def reliability_diagram(probs_by_name: dict, y, path: str, num_bins: int = 15, title: str = "") -> str:
    """Accuracy vs confidence per bin, one panel per posterior (a grid of `MAX_COLUMNS` + 2 a row), with ECE in
    each title.

    probs_by_name: {label: averaged probabilities (N, C)}; y: (N,). Writes a PNG to `path`.
    """
    n = len(probs_by_name)
    cols = min(n, MAX_COLUMNS + 2)
    fig, axes = _panel_grid(n, (2.8, 2.8), cols)
    for i, (ax, (label, probs)) in enumerate(zip(axes, probs_by_name.items())):
        centres, acc, _, _ = metrics.reliability(probs, y, num_bins)
        width = 1.0 / num_bins
        ax.bar(centres, np.nan_to_num(acc), width=width, edgecolor="k", alpha=0.7, label="accuracy")
        ax.plot([0, 1], [0, 1], "k--", lw=1)
        ax.set_title(f"{label}\nECE {metrics.ece(probs, y, num_bins):.3f}", fontsize=9)
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1)
        ax.tick_params(labelsize=8)
        if i >= n - cols:  # the bottom panel of its column
            ax.set_xlabel("confidence")
        if i % cols == 0:
            ax.set_ylabel("accuracy")
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
