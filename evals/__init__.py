"""Metrics, scoring tables and plots of posteriors."""

from evals import metrics
from evals.score import classification_row, score

__all__ = ["metrics", "score", "classification_row"]
