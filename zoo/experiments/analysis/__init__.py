"""Analyses that only the experiments use (`zoo.experiments.reproduce`, `zoo.experiments.run`,
`zoo.experiments.benchmarks`): each module computes a paper's statistic from posteriors or tables and trains
nothing of its own.

Liberty or Depth: `product_covariance` (closed-form product covariances, Fig. 1), `depth_sweep` (the depth sweep,
eq. 14-17). k-tied: `sigma_spectrum`, `rank_truncation`, `gradient_snr` (with `elbo_gradients`), `elbo_draws`,
`step_time`. Variance networks: `curvature`, `sparse_ensemble`, `fgsm`. Rank-1: `diversity`. Every job:
`seed_summary` (mean +- SE over seeds), `verdicts` (a 95 % interval judged against the paper's region).
"""
