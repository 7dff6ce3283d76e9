"""Metrics, scoring tables, corrupted test sets, OOD scoring, posterior comparisons and per-paper analyses.

Nothing here trains or builds a catalogue entry: `evals` imports only `inference` and `models`.
"""

from evals import (curvature, depth_sweep, diversity, fgsm, gaussians, gradient_snr, metrics, ood, product_covariance,
                   rank_truncation, sigma_spectrum, sparse_ensemble)
from evals.comparison import compare
from evals.corruptions import BENCHMARK_CORRUPTIONS, CORRUPTIONS, corrupt, corrupted
from evals.scoring import classification_row, score

__all__ = ["metrics", "ood", "compare", "gaussians", "product_covariance", "depth_sweep",
           "sigma_spectrum", "rank_truncation", "gradient_snr", "curvature", "sparse_ensemble", "fgsm", "diversity",
           "score", "classification_row", "corrupt", "corrupted", "CORRUPTIONS", "BENCHMARK_CORRUPTIONS"]
