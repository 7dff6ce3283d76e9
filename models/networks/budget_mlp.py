"""Widths of the liberty-or-depth two-moons MLPs: the widest MLP of a given depth under a budget.

Appendix B of the paper: "for each model depth we use the largest width that keeps the number of
weights in the model under 1000". It does not say whether biases count; the covariance it studies
is "between all parameters in the model", so biases count by default (`count_biases=True`), and
`count_biases=False` gives the weights-only reading. "Under" is strict (< budget).

depth = number of hidden layers, all of width w (so depth + 1 weight matrices):
    count(w) = in*w + (depth - 1)*w^2 + w*num_outputs  [+ depth*w + num_outputs  biases]
"""

from __future__ import annotations
from base.errors import InputError


def mlp_param_count(depth: int, width: int, in_dim: int = 2, num_outputs: int = 2,
                    count_biases: bool = True) -> int:
    """Parameters of an MLP in_dim -> [width] * depth -> num_outputs (see the module formula)."""
    if depth < 1 or width < 1 or in_dim < 1 or num_outputs < 1:
        raise InputError.worded("depth", "depth, width, in_dim and num_outputs must be >= 1; got "
                         f"{depth}, {width}, {in_dim}, {num_outputs}")
    weights = in_dim * width + (depth - 1) * width * width + width * num_outputs
    biases = depth * width + num_outputs
    return weights + (biases if count_biases else 0)


def widest_mlp_under_budget(depth: int, in_dim: int = 2, num_outputs: int = 2, budget: int = 1000,
                            count_biases: bool = True) -> int:
    """Largest width w with mlp_param_count(depth, w, ...) < budget.

    Raises ValueError when even width 1 reaches the budget. Binary search on the increasing count.
    Two-moons, budget 1000, biases counted: depth 1 -> 199 (997 params), 2 -> 28 (954), 3 -> 20.
    """

    def count(w: int) -> int:
        return mlp_param_count(depth, w, in_dim, num_outputs, count_biases)

    if count(1) >= budget:
        raise InputError.worded("budget", f"budget {budget} is too small for depth {depth}: width 1 already has "
                         f"{count(1)} parameters")
    lo, hi = 1, 2  # count(lo) < budget; grow hi until count(hi) >= budget
    while count(hi) < budget:
        lo, hi = hi, 2 * hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if count(mid) < budget else (lo, mid)
    return lo
