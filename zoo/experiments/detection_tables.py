"""Out-of-distribution detection in the jobs (`zoo run`, `zoo benchmark images`): every posterior's uncertainty on
the clean test images against the shifted sets of `zoo.data.shifted.detection_sets` (rotated 90 degrees, pixels
shuffled, uniform noise, and the corrupted test images at the highest severity), scored by `evals.detection`, and
written as ``ood_detection.csv``, ``ood_detection.png`` and a Markdown section of the job's summary.
"""

from __future__ import annotations

import os

import numpy as np
import pandas as pd

from zoo.experiments.run_report import Column, section

SCORE_SHOWN = "entropy"
"""The score of the summary's AUROC table (every score is in the CSV)."""
QUESTION = ("How well does each posterior's uncertainty tell the clean test images (in) from shifted ones (out)? "
            "AUROC by predictive {score} (1: every shifted image more uncertain than every test image; 0.5: "
            "chance), OUT the positive class; FPR at 95 % TPR: the fraction of shifted images taken for test images "
            "at the threshold that keeps 95 % of them. Every score, AUPR-in and AUPR-out: ood_detection.csv.")


def detection_rows(predictors: dict, raw_images, corrupted_sets, preprocess, *, num_samples: int,
                   seed: int = 0) -> pd.DataFrame:
    """`evals.detection.detection_frame` of `predictors` {name: posterior} on the raw test images (N, H, W) or
    (N, H, W, C) in [0, 1] against `zoo.data.shifted.detection_sets` of them and of `corrupted_sets` [(type,
    severity, raw images, labels)]; `preprocess`: raw images (N, H, W[, C]) -> the posteriors' inputs."""
    from evals.detection import detection_frame
    from zoo.data.shifted import detection_sets

    raw = np.asarray(raw_images, np.float32)
    out_sets = detection_sets(raw, corrupted_sets, seed=seed)
    return detection_frame(predictors, raw, out_sets, num_samples=num_samples, seed=seed, preprocess=preprocess)


def write_detection(table: pd.DataFrame, out, title: str = "", table_file: bool = True) -> str:
    """Write ``ood_detection.csv`` (every row; not when `table_file` is False, for a job that writes its own) and
    ``ood_detection.png`` (AUROC heat maps, `evals.detection.plot_auroc_grid`) into the folder `out`; returns the
    Markdown section of the summary (`markdown_section`)."""
    from evals.detection import plot_auroc_grid

    if table_file:
        table.to_csv(os.path.join(out, "ood_detection.csv"))
    plot_auroc_grid(table, os.path.join(out, "ood_detection.png"), title=title)
    return markdown_section(table)


def markdown_section(table: pd.DataFrame, score: str = SCORE_SHOWN) -> str:
    """The summary's section: one row per posterior, AUROC (and FPR at 95 % TPR) by `score` per out set."""
    chosen = table.xs(score, level="score")
    sets = list(dict.fromkeys(chosen.index.get_level_values("out_set")))
    rows = pd.DataFrame(index=pd.Index(list(dict.fromkeys(chosen.index.get_level_values("posterior")))))
    columns = [Column("posterior", "posterior")]
    for i, name in enumerate(sets):
        part = chosen.xs(name, level="out_set")
        rows[f"auroc_{i}"], rows[f"fpr_{i}"] = part["auroc"], part["fpr_at_95_tpr"]
        columns += [Column(f"auroc_{i}", f"{name} AUROC", ".3f"), Column(f"fpr_{i}", "FPR@95", ".2f")]
    rows = rows.rename_axis("posterior").reset_index()
    return section("Out-of-distribution detection", QUESTION.format(score=score), rows, columns)
