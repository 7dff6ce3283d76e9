"""Noise corruptions: gaussian, shot (Poisson), impulse (salt and pepper), speckle.

Per-pixel and photometric: parameters carry over to every image size. Each function has the
signature ``fn(images, param, rng, scale) -> images`` with ``images`` (N, H, W, C) in [0, 1];
``scale`` is unused here. The random numbers drawn never depend on ``param``, so for one seed the
severities are coupled (common random numbers): a higher severity moves the same pixels further.
"""

import numpy as np
from scipy import special


def gaussian_noise(images, sigma, rng, scale):
    """``x + sigma z``, z ~ N(0, 1) per value."""
    return images + sigma * rng.standard_normal(images.shape)


def speckle_noise(images, sigma, rng, scale):
    """``x + x sigma z``, z ~ N(0, 1) per value (multiplicative noise)."""
    return images + images * sigma * rng.standard_normal(images.shape)


def poisson_quantile(u, rate):
    """Smallest k with P(Poisson(rate) <= k) >= u, elementwise (scipy's poisson.ppf, faster):
    a Cornish-Fisher guess corrected by steps of one. u, rate same shape -> float64 counts."""
    shape = np.shape(u)
    u, rate = np.ravel(u), np.ravel(rate)
    z = special.ndtri(u)
    k = np.maximum(np.floor(rate + np.sqrt(rate) * z + (z**2 - 1) / 6 + 0.5), 0)
    # only the few entries that move are evaluated again
    low = np.flatnonzero(special.pdtr(k, rate) < u)
    while low.size:
        k[low] += 1
        low = low[special.pdtr(k[low], rate[low]) < u[low]]
    high = np.flatnonzero((k > 0) & (special.pdtr(k - 1, rate) >= u))
    while high.size:
        k[high] -= 1
        high = high[(k[high] > 0) & (special.pdtr(k[high] - 1, rate[high]) >= u[high])]
    return k.reshape(shape)


def shot_noise(images, lam, rng, scale):
    """``Poisson(lam x) / lam`` per value, drawn by the inverse CDF of one uniform per value so
    that the draws of different ``lam`` are coupled."""
    u = rng.uniform(size=images.shape)
    rate = lam * images.astype(np.float64)
    return np.where(rate > 0, poisson_quantile(u, np.maximum(rate, 1e-12)), 0.0) / lam


def impulse_count(amounts, values):
    """Number of values hit per image at each severity: ``round(amount * values)``, raised where
    needed so that every severity hits at least one more value than the one before (small images:
    an 8x8 grey digit has 64 values, so the .01-steps of the table would round to equal counts).
    amounts (5,) -> (5,) int."""
    counts, previous = [], 0
    for amount in amounts:
        previous = max(int(round(amount * values)), previous + 1)
        counts.append(previous)
    return np.array(counts)


def impulse_noise(images, amounts, rng, scale):
    """Salt and pepper. ``amounts`` holds the table's amounts of severities 1 .. s (the count of
    severity s depends on those below it, see :func:`impulse_count`). The ``count`` values of each
    image with the smallest random keys become 0 or 1 (a fair coin each); the hit sets of
    increasing severities are nested."""
    n = images.shape[0]
    flat = images.reshape(n, -1)
    count = impulse_count(amounts, flat.shape[1])[-1]
    keys = rng.uniform(size=flat.shape)
    salt = rng.uniform(size=flat.shape) < 0.5
    rank = np.argsort(np.argsort(keys, axis=1), axis=1)
    hit = rank < count
    return np.where(hit, salt.astype(flat.dtype), flat).reshape(images.shape)
