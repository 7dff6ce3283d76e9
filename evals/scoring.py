"""`score`: one row of metrics for a posterior on a data set, the same call for SVI and MCMC."""

from __future__ import annotations

import numpy as np
import pandas as pd

from evals import metrics


def score(posterior, data, *, num_samples: int = 100, seed: int = 0, name: str | None = None,
          verbose: bool = True) -> pd.DataFrame:
    """Accuracy, ensemble NLL, ECE (15 bins), Brier, mean predictive entropy and mutual information
    (classification) or the RMSE of the predictive mean (regression).

    Args:
      posterior: an `inference.Posterior` (or anything with ``predict(x, num_samples, seed) -> (S, N, C)``).
      data: an `inference.data.Dataset` (as `zoo.get` entries hold), or (x, y).
    Returns:
      a one-row DataFrame indexed by `name` (default: the posterior's guide or "nuts"); printed if verbose.
    """
    from inference.data_args import as_arrays

    x, y, _, data_name = as_arrays(data)
    if y is None:
        raise ValueError("data: expected labels y to score against, got None")
    member = posterior.predict(x, num_samples=num_samples, seed=seed)
    name = name or posterior_label(posterior)
    if getattr(getattr(posterior, "model", None), "likelihood", None) is not None and not posterior.model.likelihood.classification:
        mean = member.mean(0)
        row = {"rmse": float(np.sqrt(np.mean((np.reshape(mean, np.shape(y)) - y) ** 2)))}
    else:
        row = classification_row(member, y)
    row["draws"] = int(member.shape[0])
    table = pd.DataFrame([row], index=pd.Index([name], name="posterior"))
    if verbose:
        print(f"{data_name}:\n{table.to_string(float_format=lambda v: f'{v:.4f}')}")
    return table


def classification_row(member_probs, y) -> dict:
    """{accuracy, nll, ece, brier, entropy, mutual_info} from member probabilities (S, N, C) and labels (N,)."""
    probs = metrics.average(member_probs)
    return {
        "accuracy": metrics.accuracy(probs, y),
        "nll": metrics.nll(member_probs, y),
        "ece": metrics.ece(probs, y),
        "brier": metrics.brier(probs, y),
        "entropy": float(metrics.predictive_entropy(probs).mean()),
        "mutual_info": float(metrics.mutual_information(member_probs).mean()),
    }


def posterior_label(posterior) -> str:
    """A short label: the guide's registry name for SVI, "nuts" for MCMC."""
    if getattr(posterior, "kind", None) == "mcmc":
        return "nuts"
    guide = getattr(posterior, "guide", None)
    return (getattr(guide, "config", None) or {}).get("name", type(guide).__name__ if guide else "posterior")
