"""Figures of the k-tied Normal reproduction (matplotlib object API, no pyplot): Fig. 3 (singular-value
shares of sigma and of the means) and Fig. 6 right (gradient SNR and validation -ELBO vs step)."""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure

from zoo.experiments.analysis.sigma_spectrum import posterior_moments, singular_value_shares

__all__ = ["plot_spectra", "plot_traces"]


def plot_spectra(posteriors: dict, top: int = 10) -> Figure:
    """Fig. 3: for each {model label: mean-field posterior}, the share of variance of each of the first `top`
    singular values (gamma_i^2 / sum gamma^2) of every weight site's sd matrix (solid) and mean matrix
    (dashed)."""
    fig = Figure(figsize=(4.2 * len(posteriors), 3.2))
    axes = fig.subplots(1, len(posteriors), squeeze=False)[0]
    for ax, (label, post) in zip(axes, posteriors.items()):
        for i, (site, (mean, sd)) in enumerate(posterior_moments(post).items()):
            if np.ndim(mean) < 2:
                continue
            color = f"C{i % 10}"
            short = site.split("/")[-2]
            s, m = singular_value_shares(sd)[:top], singular_value_shares(mean)[:top]
            ax.plot(np.arange(1, len(s) + 1), s, "-o", color=color, ms=3, label=f"{short} sd")
            ax.plot(np.arange(1, len(m) + 1), m, "--x", color=color, ms=3, label=f"{short} mean")
        ax.set(title=label, xlabel="singular value index", ylabel="fraction of variance", ylim=(0, 1.02))
        ax.legend(fontsize=6)
    fig.tight_layout()
    return fig


def plot_traces(summary, metrics=(("snr_median", "Dense 2 gradient SNR E[g^2]/Var[g], median", True),
                                  ("val_neg_elbo", "validation -ELBO per example", False))) -> Figure:
    """Fig. 6 right: each metric's mean +- SE over seeds vs step, one line per k (mean field and k-tied).
    summary: `zoo.experiments.analysis.seed_summary.mean_se` of the trace rows by ["k", "step"]."""
    fig = Figure(figsize=(4.2 * len(metrics), 3.2))
    axes = fig.subplots(1, len(metrics), squeeze=False)[0]
    for ax, (metric, label, log_y) in zip(axes, metrics):
        for j, (k, group) in enumerate(summary.groupby("k", sort=False)):
            g = group.sort_values("step")
            mean, se = g[f"{metric}_mean"].to_numpy(), np.nan_to_num(g[f"{metric}_se"].to_numpy())
            name = "mean field" if k == "mean field" else f"{k}-tied"
            ax.errorbar(g["step"], mean, yerr=se, marker="o", ms=3, capsize=2, color=f"C{j}", label=name)
        ax.set(xlabel="training step", ylabel=label)
        if log_y:
            ax.set_yscale("log")
        ax.legend(fontsize=7)
    fig.tight_layout()
    return fig
