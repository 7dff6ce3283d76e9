"""Benchmarks against published numbers (`zoo benchmark SUITE`): experiments that call the library like a user.

`zoo.experiments.benchmarks.uci`: the UCI regression benchmark (Hernandez-Lobato & Adams 2015 splits), every guide against
NUTS of the identical model; `zoo.experiments.benchmarks.uci_report` writes its summary, verdicts and figure.
"""
