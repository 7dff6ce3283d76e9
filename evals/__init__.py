"""Metrics, scoring tables, corrupted test sets, OOD scoring, posterior comparisons and per-paper analyses.

Nothing here trains or builds a catalogue entry: `evals` imports only `inference` and `models`.
"""

from evals import depth_sweep, diversity, gaussians, metrics, ood, product_covariance
from evals.comparison import compare
from evals.corruptions import BENCHMARK_CORRUPTIONS, CORRUPTIONS, corrupt, corrupted
from evals.scoring import classification_row, score

__all__ = ["metrics", "ood", "diversity", "compare", "gaussians", "product_covariance", "depth_sweep", "score",
           "classification_row", "corrupt", "corrupted", "CORRUPTIONS", "BENCHMARK_CORRUPTIONS"]
