"""What a guide of the zoo offers, as typing Protocols (checked with ``isinstance`` at run time).

Every guide (`inference.site_guide.SiteGuide`, `inference.joint_gaussian.JointGaussian`, or your own) is a NumPyro AutoGuide and
`Guide` says what `fit`, `Posterior`, checkpoints and the tables use besides that. `HasSiteMoments` is
optional: a guide whose sites are slices of one auxiliary Gaussian offers the marginal moments, and the
ELBO then uses the exact expected log-prior of Normal-prior sites (`inference.gaussian_kl`).
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable


@runtime_checkable
class Guide(Protocol):
    """The guide interface beyond NumPyro's AutoGuide (``__call__``, ``sample_posterior``, ``median``, ``quantiles``).

    config: a JSON-able {"name": registry name, **kwargs} that rebuilds the guide with
      ``inference.make_guide`` (stored in checkpoints).
    num_params_formula(): scalar variational parameters by the paper's formula.
    num_free_params(params): free scalar parameters counted from the constrained params dict.
    """

    @property
    def config(self) -> dict: ...

    def num_params_formula(self) -> int: ...

    def num_free_params(self, params: dict) -> int: ...


@runtime_checkable
class HasSiteMoments(Protocol):
    """site_moments(params) -> {site: (mean, variance)} of the unconstrained site values, each of the
    site's shape, for guides that hand the model Delta slices of a joint Gaussian."""

    def site_moments(self, params: dict) -> dict: ...
