"""Metrics, scoring tables, corrupted test sets, OOD scoring and plots of posteriors."""

from evals import depth_sweep, gaussians, metrics, ood, product_covariance
from evals.compare import compare
from evals.corruptions import BENCHMARK_CORRUPTIONS, CORRUPTIONS, corrupt, corrupted
from evals.score import classification_row, score

__all__ = ["metrics", "ood", "compare", "gaussians", "product_covariance", "depth_sweep", "score", "classification_row", "corrupt", "corrupted", "CORRUPTIONS",
           "BENCHMARK_CORRUPTIONS"]
