"""Metrics, scoring tables, corrupted test sets, OOD scoring on them (`evals.ood`), out-of-distribution detection
(`evals.detection`, `evals.ood_detection`) and posterior comparisons: what a user imports to judge a posterior.

Nothing here trains or builds a catalogue entry: `evals` imports only `inference` and `models`. The analyses
that only the paper reproductions and `zoo run` use are in `zoo.experiments.analysis`.
"""

from evals import detection, gaussians, metrics, ood
from evals.comparison import compare
from evals.detection import ood_detection
from evals.corruptions import BENCHMARK_CORRUPTIONS, CORRUPTIONS, corrupt, corrupted
from evals.scoring import classification_row, score, temperature_scale
from evals.temperature import Temperature

__all__ = ["metrics", "ood", "detection", "ood_detection", "compare", "gaussians", "score", "classification_row", "temperature_scale", "Temperature", "corrupt", "corrupted",
           "CORRUPTIONS", "BENCHMARK_CORRUPTIONS"]
