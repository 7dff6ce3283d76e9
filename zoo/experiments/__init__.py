"""The experiments: jobs that call the library the way a user would and write reports, apart from the library
(`models`, `inference`, `evals` and the catalogue `zoo`) so that the library holds only what a user imports.

`zoo.experiments.run`: ``zoo run``, the main job on embedded data (its tables: `run`; its report: `run_report`;
its worker processes: `parallel`). `zoo.experiments.reproduce`: ``zoo reproduce PAPER``, the paper reproductions.
`zoo.experiments.benchmarks`: ``zoo benchmark SUITE`` (the UCI regression benchmark).
`zoo.experiments.analysis`: the analyses only these jobs use (per-paper statistics, seed summaries, verdicts).

Imports go one way: the experiments import the library, never the reverse; of the library, only the command line
(`zoo.cli`) names the experiments, to run them (tests/test_layering.py checks both).
"""
