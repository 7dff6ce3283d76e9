"""The point-estimate guide: q(w) = delta(w - w_hat), i.e. MAP training (the prior acts as L2)."""

from __future__ import annotations

from numpyro.infer.autoguide import AutoDelta

from inference.guide_base import BNNGuide


class PointEstimate(AutoDelta, BNNGuide):
    """A Delta at a learned value for every latent site (NumPyro's AutoDelta with the fast prototype).

    The ELBO then is log p(y | x, w_hat) + log p(w_hat): maximum a posteriori. Values start at the
    network's own initialisation. Parameters: 1 per weight (``{site}_auto_loc``).
    """

    def __init__(self, model, *, prefix: str = "auto"):
        super().__init__(model, prefix=prefix)
        self.config = {"name": "point_estimate", "prefix": prefix}

    def num_params_formula(self) -> int:
        """1 per latent value."""
        return self.num_latent()


def point_estimate(model, *, prefix: str = "auto") -> PointEstimate:
    """The MAP / deterministic-network guide for `model` (the reference row of mCE tables)."""
    return PointEstimate(model, prefix=prefix)
