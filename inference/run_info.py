"""What a run records about itself: `Posterior.info` is a `FitInfo` (SVI, from `fit`) or a `NutsInfo`
(MCMC, from `nuts`), or None when nothing was recorded (a Posterior built by hand).

Checkpoints store ``info._asdict()`` with the type's name (`info_record`) and rebuild the tuple from them
(`info_from_record`), which refuses a record without its type or with other fields than the type's.
"""

from __future__ import annotations

from typing import NamedTuple

from inference import collapse as collapse_rule
from inference.convergence import describe
from base.errors import ArgumentTypeError, InputError


class FitInfo(NamedTuple):
    """Timings and counters of one `inference.fit` run.

    Fields:
      first_step_s: seconds from the start of the run (after argument checks) until the first chunk of
        steps returned: guide initialisation, the compile of the scanned update and one chunk of steps.
      fit_s: seconds of the whole run, the same start to the Posterior being built (float).
      traces: how many programs of the scanned update this fit added to jit's cache (the growth of
        ``inference.svi.run_chunk._cache_size()`` over the run: 0 when the compiled update was reused, 1 when the
        fit compiled it; another fit compiling at the same time in another thread would count too).
      temperature: the likelihood temperature T the fit targeted, p(y | x, w)^(1/T) p(w) (float; 1 is the
        Bayesian posterior; see `inference.fit`).
      converged: whether the ELBO had converged when the fit ended (bool; None: not judged, e.g. a FitInfo built
        by hand); convergence: the judgement's numbers (a dict, see
        `inference.convergence.judge`).
      collapsed: whether the posterior ignores the data: its predictive explains the training data no better
        than the prior predictive or an input-free predictor (bool; None: not judged, e.g. a model that is not
        a `models.BNN`); collapse: the judgement's numbers
        (a dict, see `inference.collapse.check_collapse`).
      final_kl_weight: beta of the fit's last step, the weight of its KL term (float; 1 without KL warm-up or
        schedule, below 1 when the schedule had not reached 1; None: a fit of 0 steps). See
        `inference.kl_schedules`.
    """

    first_step_s: float | None
    fit_s: float | None
    traces: int | None
    temperature: float | None = 1.0
    converged: bool | None = None
    convergence: dict | None = None
    collapsed: bool | None = None
    collapse: dict | None = None
    final_kl_weight: float | None = None

    def summary(self) -> str:
        """One line: the convergence judgement, a collapse when one was found, and the temperature and the last
        step's KL weight when they are not 1."""
        text = describe(self.convergence) + collapse_rule.describe(self.collapse)
        if self.temperature is not None and self.temperature != 1.0:
            text += f"; tempered posterior: temperature {self.temperature:g}, likelihood^{1 / self.temperature:.4g}"
        if self.final_kl_weight is not None and self.final_kl_weight != 1.0:
            text += f"; KL weight at the last step {self.final_kl_weight:.4g}"
        return text


class NutsInfo(NamedTuple):
    """Timings and counters of one `inference.nuts` run.

    Fields:
      nuts_s: seconds of warm-up and sampling of all chains, including the copy of the draws to the host
        (float; parallel chains run asynchronously, so the copy is where they are waited for).
      divergences: divergent transitions after warm-up, summed over chains and draws (int).
      mean_leapfrog_steps: leapfrog steps per draw after warm-up, averaged over chains and draws (float).
      chain_method: how the chains ran: "parallel", "sequential" or "vectorized" (str).
    """

    nuts_s: float | None
    divergences: int | None
    mean_leapfrog_steps: float | None
    chain_method: str | None


INFO_TYPES: dict[str, type[FitInfo] | type[NutsInfo]] = {cls.__name__: cls for cls in (FitInfo, NutsInfo)}


def info_record(info: FitInfo | NutsInfo | None) -> tuple[str | None, dict | None]:
    """(type name, {field: value}) of `info` for a JSON checkpoint; (None, None) for None."""
    if info is None:
        return None, None
    check_info(info)
    return type(info).__name__, info._asdict()


def info_from_record(type_name: str | None, fields: dict | None) -> FitInfo | NutsInfo | None:
    """Rebuild `Posterior.info` from a checkpoint's record, the inverse of `info_record`.

    Args:
      type_name: "FitInfo" or "NutsInfo"; None (with `fields` None) for a posterior that recorded nothing.
      fields: {field: value}, exactly the type's fields (``info._asdict()``).
    Returns:
      the NamedTuple, or None for (None, None).
    Raises:
      InputError naming ``info_type`` or ``info`` for another type name, a record without its type name, or
      fields other than the type's (a record of a pre-release version).
    """
    if type_name is None and fields is None:
        return None
    if type_name not in INFO_TYPES:
        raise InputError.worded("info_type", f"info_type: expected one of {sorted(INFO_TYPES)} (with a record of "
                                             f"its fields), got {type_name!r}")
    cls = INFO_TYPES[type_name]
    fields = fields if isinstance(fields, dict) else {}
    missing, unknown = [k for k in cls._fields if k not in fields], sorted(set(fields) - set(cls._fields))
    if missing or unknown:
        raise InputError.worded("info", f"info: expected the fields of {type_name} {list(cls._fields)}, got a "
                                        f"record lacking {missing} and with unknown fields {unknown}")
    return cls(**{name: fields[name] for name in cls._fields})


def check_info(info) -> None:
    """Raise TypeError unless `info` is a FitInfo, a NutsInfo or None."""
    if info is not None and not isinstance(info, (FitInfo, NutsInfo)):
        raise ArgumentTypeError.worded("info",
                                       f"info: expected an inference.run_info.FitInfo, NutsInfo or None, got {type(info).__name__}")
