"""Rank-1 Normal against the library's BatchEnsemble (MAP under the Normal(1, 0.1) factor prior) and the
unregularised one (no factor prior, Wen et al.'s): Table 2's NLL / accuracy / ECE / cNLL and Fig. 6's member
diversity (disagreement / (1 - accuracy), mean over the checkpoints after 60 % of training) on the digits, with
`zoo reproduce rank1`'s quick recipe (3,000 steps) and its `table2`, 5 seeds; differences paired by seed with
95 % t-intervals (`zoo.experiments.analysis.verdicts`).

Run: python benchmarks/bench_rank1_diversity.py [seeds]
"""

import sys
import time
from dataclasses import replace

from zoo.experiments.reproduce.rank1 import QUICK
from zoo.experiments.reproduce.rank1_setup import task_split
from zoo.experiments.reproduce.rank1_tasks import table2
from zoo.experiments.reproduce.rank1_verdicts import paired, shown

METHODS = ("batch_ensemble", "batch_ensemble_unregularised", "rank1_normal")


def main(seeds: int = 5):
    t0 = time.perf_counter()
    job = replace(QUICK, seeds=tuple(range(seeds)), methods=METHODS, eval_samples=(1,),
                  types=("gaussian_noise", "contrast", "motion_blur"), severities=(3,))
    runs, _, div = table2(job, task_split(), log=lambda line: None)
    print(shown(runs, "method", ["NLL", "Acc", "ECE", "cNLL"]).to_string(index=False))
    late = div.groupby(["method", "seed"], as_index=False)[["diversity", "accuracy"]].mean()
    print(late.groupby("method")[["diversity", "accuracy"]].mean())
    for be in METHODS[:2]:
        print(f"rank-1 - {be}: diversity {paired(late, 'method', 'rank1_normal', be, 'diversity').text()}; "
              f"accuracy {paired(late, 'method', 'rank1_normal', be, 'accuracy').text(scale=100)} points; "
              f"NLL {paired(runs, 'method', 'rank1_normal', be, 'NLL').text()}; "
              f"cNLL {paired(runs, 'method', 'rank1_normal', be, 'cNLL').text()}")
    print(f"{time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 5)
