"""A network: one hidden layer of `width` tanh units (a Haiku function x (B, d) -> logits (B, classes)). It
imports only `models`, so it works outside the package and as ``models/networks/plugin_network.py``."""

from models.networks.mlp import mlp


def plugin_mlp(width: int, num_classes: int):
    """x (B, d) -> logits (B, num_classes) through one hidden layer of `width` tanh units."""
    return mlp((width,), num_classes, "tanh")
