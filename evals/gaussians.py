"""Gaussian summaries of posterior draws (Liberty or Depth, section 4 and appendix B).

Pure NumPy/SciPy functions in float64. Notation: ``D`` is the number of (flattened) parameters and
``S`` the number of draws. ``q_full = N(mu, Sigma)`` is the full-covariance Gaussian fitted to
draws of the true posterior, and ``q_diag = N(mu', Sigma')`` the diagonal Gaussian closest to it in
KL(q_diag || q_full) (eq. 5-6).

KL(q_diag || q_full) in closed form. With the precision ``P = Sigma^-1`` and eq. 5-6
(``mu' = mu``, ``Sigma' = diag(P)^-1``) the Gaussian KL

    KL(N(mu', Sigma') || N(mu, Sigma)) = 1/2 [tr(P Sigma') - D + (mu - mu')^T P (mu - mu')
                                              + log det Sigma - log det Sigma']

has ``tr(P Sigma') = sum_i P_ii / P_ii = D`` and a zero Mahalanobis term, so

    KL(q_diag || q_full) = 1/2 [sum_i log P_ii + log det Sigma] = 1/2 [sum_i log P_ii - log det P],

which is >= 0 by Hadamard's inequality and 0 exactly when ``Sigma`` is diagonal. For a 2-D Gaussian
with correlation rho it is ``-1/2 log(1 - rho^2)``.

The blog states the other direction, KL(q_full || q_diag). Over diagonal Gaussians that is minimised by
moment matching, ``N(mu, diag(Sigma))`` (the "marginal" diagonal), and equals
``1/2 [sum_i log Sigma_ii - log det Sigma] = -1/2 log det R`` with R the correlation matrix of Sigma;
also ``-1/2 log(1 - rho^2)`` in 2-D, but different from the closest diagonal's KL for D > 2.
"""

from __future__ import annotations

import numpy as np
import scipy.linalg
import scipy.optimize
from base.errors import InputError

__all__ = [
    "JITTER",
    "fit_gaussian",
    "closest_diagonal",
    "kl_gaussians",
    "kl_closest_diagonal",
    "kl_marginal_diagonal",
    "wasserstein2_gaussians",
    "empirical_wasserstein2",
    "mean_field_extra_error",
]

# Appendix B adds jitter to the diagonal of the empirical covariance before the Cholesky
# decomposition. The exponent is lost in the OCR of the paper ("10~ jitter"); 1e-6 is our choice.
# With about as many draws as parameters the empirical covariance is (nearly) singular, so the
# jitter sets the smallest eigenvalues and with them the scale of KL(q_diag || q_full): report it.
JITTER = 1e-6


def _matrix(value, name: str, ndim: int) -> np.ndarray:
    array = np.asarray(value, dtype=np.float64)
    if array.ndim != ndim:
        raise InputError.worded(name, f"{name} must be a {ndim}-D array, got shape {array.shape}")
    if not np.all(np.isfinite(array)):
        raise InputError.worded(name, f"{name} must be finite (it contains NaN or inf)")
    return array


def _covariance(cov, name: str, dim: int) -> np.ndarray:
    """A (D, D) covariance from either a (D, D) matrix or (D,) variances."""
    array = np.asarray(cov, dtype=np.float64)
    if array.ndim == 1:
        array = np.diag(array)
    array = _matrix(array, name, 2)
    if array.shape != (dim, dim):
        raise InputError.worded(name, f"{name} must have shape ({dim}, {dim}) or ({dim},), got {np.shape(cov)}")
    return array


def _cholesky(cov: np.ndarray, name: str) -> np.ndarray:
    try:
        return np.linalg.cholesky(cov)
    except np.linalg.LinAlgError as error:
        raise InputError.worded(name,
            f"{name} is not positive definite (Cholesky failed); add jitter to its diagonal"
        ) from error


def _sqrtm_psd(matrix: np.ndarray) -> np.ndarray:
    """Symmetric square root of a symmetric positive semi-definite (D, D) matrix via eigh."""
    eigenvalues, eigenvectors = np.linalg.eigh(0.5 * (matrix + matrix.T))
    return (eigenvectors * np.sqrt(np.clip(eigenvalues, 0.0, None))) @ eigenvectors.T


def fit_gaussian(draws, jitter: float = JITTER) -> tuple[np.ndarray, np.ndarray]:
    """Full-covariance Gaussian q_full = N(mu, Sigma) fitted to draws (section 4, appendix B).

    Args:
      draws: (S, D) posterior draws, S >= 2 (e.g. 1000 NUTS draws of all D weights, flattened).
      jitter: added to the diagonal of the empirical covariance (appendix B) so that the Cholesky
        decomposition of the (S <= D: singular) empirical covariance exists.
    Returns:
      mean (D,) and cov (D, D): the sample mean and the unbiased (1 / (S - 1)) empirical
      covariance plus ``jitter * I``.
    """
    draws = _matrix(draws, "draws", 2)
    if draws.shape[0] < 2:
        raise InputError.worded("draws", f"draws must hold at least 2 draws (rows), got shape {draws.shape}")
    if jitter < 0:
        raise InputError.worded("jitter", f"jitter must be >= 0, got {jitter}")
    mean = draws.mean(axis=0)
    centred = draws - mean
    cov = centred.T @ centred / (draws.shape[0] - 1)
    return mean, cov + jitter * np.eye(draws.shape[1])


def _square_cholesky(cov) -> tuple[np.ndarray, np.ndarray]:
    """A finite square (D, D) ``cov`` as float64 and its lower Cholesky factor."""
    cov = _matrix(cov, "cov", 2)
    if cov.shape[0] != cov.shape[1]:
        raise InputError.worded("cov", f"cov must be square, got shape {cov.shape}")
    return cov, _cholesky(cov, "cov")


def _logdet(chol: np.ndarray) -> float:
    """log det Sigma = 2 sum log diag L for Sigma = L L^T."""
    return float(2.0 * np.sum(np.log(np.diag(chol))))


def _diag_of_inverse(chol: np.ndarray) -> np.ndarray:
    """diag(Sigma^-1) (D,) from Sigma's Cholesky factor L: Sigma^-1 = L^-T L^-1, so P_ii = sum_k (L^-1)_ki^2."""
    inverse_factor = scipy.linalg.solve_triangular(chol, np.eye(chol.shape[0]), lower=True)
    return np.sum(inverse_factor**2, axis=0)


def closest_diagonal(mean, cov) -> tuple[np.ndarray, np.ndarray]:
    """The diagonal Gaussian q_diag closest to N(mean, cov) in KL(q_diag || q_full) (eq. 5-6).

    mu' = mu (eq. 5) and Sigma' = diag(Sigma^-1)^-1 (eq. 6): each variance is the inverse of the
    corresponding diagonal entry of the precision (the conditional variance), never larger than the
    marginal variance.

    Args:
      mean: (D,) mean of q_full.
      cov: (D, D) positive-definite covariance of q_full.
    Returns:
      mean (D,) (a copy of ``mean``) and variances (D,), the diagonal of Sigma'.
    """
    mean = _matrix(mean, "mean", 1)
    cov = _covariance(cov, "cov", mean.shape[0])
    return mean.copy(), 1.0 / _diag_of_inverse(_cholesky(cov, "cov"))


def kl_gaussians(m0, S0, m1, S1) -> float:
    """KL(N(m0, S0) || N(m1, S1)) in nats, via Cholesky factors (no explicit inverse).

    KL = 1/2 [tr(S1^-1 S0) + (m1 - m0)^T S1^-1 (m1 - m0) - D + log det S1 - log det S0], with
    tr(S1^-1 S0) = ||L1^-1 L0||_F^2 and log det S = 2 sum log diag L.

    Args:
      m0, m1: (D,) means.
      S0, S1: (D, D) positive-definite covariances, or (D,) variances of a diagonal Gaussian.
    Returns:
      the KL divergence, a float >= 0.
    """
    m0 = _matrix(m0, "m0", 1)
    m1 = _matrix(m1, "m1", 1)
    if m1.shape != m0.shape:
        raise InputError.worded("m1", f"m1 must have shape {m0.shape} like m0, got {m1.shape}")
    dim = m0.shape[0]
    chol0 = _cholesky(_covariance(S0, "S0", dim), "S0")
    chol1 = _cholesky(_covariance(S1, "S1", dim), "S1")
    whitened = scipy.linalg.solve_triangular(chol1, chol0, lower=True)
    offset = scipy.linalg.solve_triangular(chol1, m1 - m0, lower=True)
    return float(0.5 * (np.sum(whitened**2) + offset @ offset - dim + _logdet(chol1) - _logdet(chol0)))


def kl_closest_diagonal(cov) -> float:
    """KL(q_diag || q_full) for q_full = N(mu, cov) and its closest diagonal q_diag (eq. 5-6).

    Closed form (derived in the module docstring): 1/2 [sum_i log (Sigma^-1)_ii + log det Sigma].
    It depends on the covariance only (mu' = mu), is 0 for a diagonal ``cov`` and
    -1/2 log(1 - rho^2) for a 2-D Gaussian with correlation rho. This is the y-axis of Fig. 2.

    Args:
      cov: (D, D) positive-definite covariance of q_full (e.g. from ``fit_gaussian``).
    Returns:
      the KL divergence in nats, a float >= 0.
    """
    cov, chol = _square_cholesky(cov)
    return float(0.5 * (np.sum(np.log(_diag_of_inverse(chol))) + _logdet(chol)))


def kl_marginal_diagonal(cov) -> float:
    """KL(q_full || q_marg) with q_marg = N(mu, diag(Sigma)), the diagonal minimising this direction.

    Closed form (module docstring): 1/2 [sum_i log Sigma_ii - log det Sigma] = -1/2 log det R, R the
    correlation matrix. The blog's KL figure is labelled with this direction of the KL.

    Args:
      cov: (D, D) positive-definite covariance of q_full.
    Returns:
      the KL divergence in nats, a float >= 0.
    """
    cov, chol = _square_cholesky(cov)
    return float(0.5 * (np.sum(np.log(np.diag(cov))) - _logdet(chol)))


def wasserstein2_gaussians(m0, S0, m1, S1) -> float:
    """2-Wasserstein distance between N(m0, S0) and N(m1, S1) (Bures form).

    W2^2 = ||m0 - m1||^2 + tr(S0 + S1 - 2 (S1^1/2 S0 S1^1/2)^1/2), with symmetric square roots
    from an eigendecomposition. If both covariances are given as (D,) variances (diagonal
    Gaussians) the closed form W2^2 = ||m0 - m1||^2 + sum_i (sqrt(v0_i) - sqrt(v1_i))^2 is used.

    Args:
      m0, m1: (D,) means.
      S0, S1: (D, D) positive semi-definite covariances, or (D,) variances.
    Returns:
      W2 (the distance, not its square), a float >= 0.
    """
    m0 = _matrix(m0, "m0", 1)
    m1 = _matrix(m1, "m1", 1)
    if m1.shape != m0.shape:
        raise InputError.worded("m1", f"m1 must have shape {m0.shape} like m0, got {m1.shape}")
    mean_term = float(np.sum((m0 - m1) ** 2))
    if np.ndim(S0) == 1 and np.ndim(S1) == 1:
        v0 = _matrix(S0, "S0", 1)
        v1 = _matrix(S1, "S1", 1)
        if np.any(v0 < 0) or np.any(v1 < 0):
            raise InputError.worded("S0", "S0 and S1 given as variances must be >= 0")
        return float(np.sqrt(mean_term + np.sum((np.sqrt(v0) - np.sqrt(v1)) ** 2)))
    dim = m0.shape[0]
    cov0 = _covariance(S0, "S0", dim)
    cov1 = _covariance(S1, "S1", dim)
    root1 = _sqrtm_psd(cov1)
    cross = np.trace(_sqrtm_psd(root1 @ cov0 @ root1))
    bures = np.trace(cov0) + np.trace(cov1) - 2.0 * cross
    return float(np.sqrt(max(mean_term + bures, 0.0)))


def empirical_wasserstein2(x, y) -> float:
    """Exact 2-Wasserstein distance between two equal-size empirical distributions.

    With S points of weight 1/S on each side the optimal transport plan is a permutation
    (Birkhoff), found exactly by the Hungarian algorithm on the squared Euclidean costs.
    The estimate of W2 between the underlying distributions is biased upwards (it is > 0 even
    for two sample sets of one distribution).

    Args:
      x: (S, D) points; y: (S, D) points.
    Returns:
      W2 = sqrt(min over permutations pi of 1/S sum_s ||x_s - y_pi(s)||^2), a float >= 0.
    """
    x = _matrix(x, "x", 2)
    y = _matrix(y, "y", 2)
    if x.shape != y.shape:
        raise InputError.worded("y", f"y must have the shape of x {x.shape}, got {y.shape}")
    cost = np.sum(x**2, axis=1)[:, None] + np.sum(y**2, axis=1)[None, :] - 2.0 * x @ y.T
    rows, cols = scipy.optimize.linear_sum_assignment(cost)
    return float(np.sqrt(max(np.mean(cost[rows, cols]), 0.0)))


def mean_field_extra_error(draws, jitter: float = JITTER, seed: int = 0,
                           diagonal: str = "marginal") -> dict[str, float]:
    """The blog's "extra error of the mean-field assumption": W2(q_diag, p) - W2(q_full, p).

    The blog computes the Wasserstein distance between the mean-field approximation and the true
    posterior, and between the full-covariance approximation and the true posterior; their
    difference is the error added by the diagonal assumption beyond that of a Gaussian
    approximation, and "a bias in the way this is estimated means it will never go to zero".
    The true posterior p is only known through its draws, so both distances are sample-based:
    S draws from q_full (``fit_gaussian``) and S draws from q_diag are each matched to the S posterior
    draws by ``empirical_wasserstein2``. A Gaussian closed form cannot be used: W2(q_full, N(fit of p))
    is 0 by construction. The empirical estimate is biased upwards, more so in high dimension.

    Which diagonal: ``"marginal"`` (default) is N(mu, diag(Sigma)), the mean-field Gaussian that
    minimises the blog's KL(q_full || q_diag) and has the posterior's marginal spread; ``"closest"`` is
    eq. 5-6's N(mu, diag(Sigma^-1)^-1). The closest diagonal's smaller (conditional) variances shrink
    its cloud, and with D comparable to S a shrunken cloud gets a smaller empirical W2 to the draws
    than a correctly spread one, so its "extra error" can be negative (seen on the depth sweep).

    Args:
      draws: (S, D) draws of the true posterior (e.g. NUTS), S >= 2.
      jitter: diagonal jitter of the full-covariance fit (appendix B).
      seed: seed of the Gaussian draws.
      diagonal: "marginal" or "closest".
    Returns:
      {"w2_diag": W2(q_diag draws, draws), "w2_full": W2(q_full draws, draws),
       "extra_error": w2_diag - w2_full}.
    """
    draws = _matrix(draws, "draws", 2)
    mean, cov = fit_gaussian(draws, jitter)
    if diagonal == "marginal":
        diag_var = np.diag(cov)
    elif diagonal == "closest":
        diag_var = closest_diagonal(mean, cov)[1]
    else:
        raise InputError.worded("diagonal", f"diagonal must be 'marginal' or 'closest', got {diagonal!r}")
    rng = np.random.default_rng(seed)
    noise_full, noise_diag = rng.standard_normal((2,) + draws.shape)
    full = mean + noise_full @ _cholesky(cov, "cov").T
    diag = mean + noise_diag * np.sqrt(diag_var)
    w2_full = empirical_wasserstein2(full, draws)
    w2_diag = empirical_wasserstein2(diag, draws)
    return {"w2_diag": w2_diag, "w2_full": w2_full, "extra_error": w2_diag - w2_full}
