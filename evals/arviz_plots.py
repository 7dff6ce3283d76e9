"""ArviZ's forest and pair plots of several posteriors under ArviZ 0.x (matplotlib plots, ``az.plot_forest(...,
ax=...)`` returning axes) and ArviZ 1.x (arviz-plots: a ``PlotCollection`` whose ``viz["figure"]`` is the
matplotlib figure), with one return type: a NumPy array of the matplotlib ``Axes`` drawn on.

Under ArviZ 1.x the plots draw on a figure of their own (arviz-plots lays out its panels itself): an ``ax`` passed
there is refused (InputError naming ``ax``) rather than silently ignored.
"""

from __future__ import annotations

import numpy as np

from base.errors import InputError
from inference.arviz_compat import ARVIZ_1, arviz


def _no_ax_under_1(ax, feature: str) -> None:
    if ARVIZ_1 and ax is not None:
        raise InputError("ax", f"<{type(ax).__name__}>", f"None under ArviZ {arviz.__version__}",
                         f"{feature} draws with arviz-plots, which lays out a figure of its own")


def _axes_of(collection) -> np.ndarray:
    """The Axes of an arviz-plots PlotCollection's matplotlib figure, in the figure's order."""
    figure = collection.viz["figure"].item()
    return np.asarray(figure.axes, dtype=object)


def forest(datasets: list, labels, *, ax=None, feature: str = "forest") -> np.ndarray:
    """A forest plot (point estimate and credible intervals, chains combined) of every variable of `datasets`
    (ArviZ data with a posterior group, e.g. `evals.comparison.to_inference_data`), one line per data set,
    named by `labels` (one per data set). Returns the Axes (0.x: ``az.plot_forest``'s; 1.x: the figure's, the
    first holding the variable labels as text)."""
    if len(labels) != len(datasets):
        raise InputError("labels", list(labels), f"{len(datasets)} names, one per posterior")
    _no_ax_under_1(ax, feature)
    if ARVIZ_1:
        collection = arviz.plot_forest(dict(zip(labels, datasets)), combined=True, backend="matplotlib")
        return _axes_of(collection)
    return np.atleast_1d(arviz.plot_forest(list(datasets), model_names=list(labels), combined=True, ess=False, ax=ax))


def pair(datasets: list, labels, *, ax=None, feature: str = "pair") -> np.ndarray:
    """Scatter plots of every pair of variables, the data sets overlaid (colours C0, C1, ...; alpha 0.3, each
    labelled by `labels`). Returns the Axes (one per pair under 0.x; under 1.x the figure's grid, marginals on the
    diagonal)."""
    if len(labels) != len(datasets):
        raise InputError("labels", list(labels), f"{len(datasets)} names, one per posterior")
    _no_ax_under_1(ax, feature)
    if ARVIZ_1:
        collection = None
        for i, data in enumerate(datasets):
            collection = arviz.plot_pair(data, backend="matplotlib", plot_matrix=collection,
                                         visuals={"scatter": {"alpha": 0.3, "color": f"C{i}", "label": labels[i]}})
        return _axes_of(collection)
    axes = ax
    for i, data in enumerate(datasets):
        axes = arviz.plot_pair(data, scatter_kwargs={"alpha": 0.3, "color": f"C{i}", "label": labels[i]}, ax=axes)
    return np.atleast_1d(axes)


def _figure_of(result):
    """The matplotlib Figure of an ArviZ plot's result: a PlotCollection (1.x) or Axes / an array of them (0.x)."""
    if ARVIZ_1:
        return result.viz["figure"].item()
    return np.ravel(result)[0].figure


def trace(data):
    """ArviZ's trace plot of every variable of `data` (a posterior group with chains): per variable the marginal
    density of each chain and the draws against their index (0.x ``az.plot_trace``, 1.x ``plot_trace_dist``).
    Returns the matplotlib Figure."""
    if ARVIZ_1:
        return _figure_of(arviz.plot_trace_dist(data, backend="matplotlib"))
    figure = _figure_of(arviz.plot_trace(data))
    rows = len(figure.axes) // 2  # a density and a trace panel per variable
    figure.set_size_inches(10, 1.9 * rows + 0.4)
    figure.tight_layout()  # 0.x's default size lets titles run into the tick labels of the panel above
    return figure


def rank(data):
    """ArviZ's rank plot of every variable of `data`: the histogram (0.x: bars) or ECDF difference (1.x) of each
    chain's ranks among all draws; chains that mix give flat, overlapping ranks. Returns the matplotlib Figure."""
    if ARVIZ_1:
        return _figure_of(arviz.plot_rank(data, backend="matplotlib"))
    return _figure_of(arviz.plot_rank(data))
