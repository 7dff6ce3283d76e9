"""The curvature blocks of a Laplace posterior, each kept in its eigenbasis so that the posterior precision
GGN + delta I of any prior precision delta, its log-determinant and exact draws come without refactorising.

A block covers some sites (their values flattened row-major and concatenated in order):

* ``"dense"``: GGN_block = V diag(lambda) V^T (arrays ``eigvals`` (P,), ``eigvecs`` (P, P));
  draw = V (eps / sqrt(lambda + delta)).
* ``"diag"``: GGN_block = diag(lambda) (``eigvals`` (P,)); draw = eps / sqrt(lambda + delta).
* ``"kfac"``: one weight site, GGN_block ~= A (x) G (Martens & Grosse 2015; for convolutions the "expand"
  form of Grosse & Martens 2016 / Eschenhagen et al. 2023), over the weight's values permuted by ``perm`` and
  reshaped to a (P_in, P_out) matrix W (row-major vec(W) = the Kronecker order). A = U_a diag(a) U_a^T,
  G = U_g diag(g) U_g^T (arrays ``eig_a``, ``vec_a``, ``eig_g``, ``vec_g``); the eigenvalues of A (x) G +
  delta I are a_i g_j + delta, and draw = U_a (E / sqrt(a g^T + delta)) U_g^T for E (P_in, P_out) ~ N(0, I).

Every draw is exact for its block's precision (eigenvalues clipped at 0 against round-off).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import jax
import jax.numpy as jnp
import numpy as np
from scipy import linalg

KINDS = ("dense", "diag", "kfac")


@dataclass
class Block:
    """One curvature block (module docstring): `kind`, the `sites` it covers, its `arrays` {name: array} and, for
    kfac, `perm` (the weight's axes in (inputs..., outputs...) order) and `split` (how many of them are inputs)."""

    kind: str
    sites: tuple
    arrays: dict
    perm: tuple = ()
    split: int = 0
    meta: dict = field(default_factory=dict)

    def eigvals(self) -> np.ndarray:
        """(P,) the block GGN's eigenvalues (>= 0), float64."""
        if self.kind == "kfac":
            lam = np.outer(self.arrays["eig_a"], self.arrays["eig_g"]).ravel()
        else:
            lam = np.asarray(self.arrays["eigvals"]).ravel()
        return np.clip(np.asarray(lam, np.float64), 0.0, None)

    def deviations(self, key, num: int, prior_precision: float, shapes: dict) -> dict:
        """{site: (num, *shape)}: `num` exact draws of theta - theta* from N(0, (GGN_block + delta I)^-1), float32.
        shapes: {site: shape}."""
        delta = jnp.float32(prior_precision)
        arr = {k: jnp.asarray(v, jnp.float32) for k, v in self.arrays.items()}
        if self.kind == "kfac":
            (site,) = self.sites
            a, g = jnp.clip(arr["eig_a"], 0.0), jnp.clip(arr["eig_g"], 0.0)
            eps = jax.random.normal(key, (num, a.size, g.size))
            mats = arr["vec_a"] @ (eps / jnp.sqrt(a[:, None] * g[None, :] + delta)) @ arr["vec_g"].T
            permuted = tuple(shapes[site][i] for i in self.perm)
            inverse = tuple(int(i) + 1 for i in np.argsort(self.perm))
            return {site: jnp.transpose(mats.reshape((num,) + permuted), (0,) + inverse)}
        lam = jnp.clip(arr["eigvals"], 0.0)
        eps = jax.random.normal(key, (num, lam.size)) / jnp.sqrt(lam + delta)
        flat = eps @ arr["eigvecs"].T if self.kind == "dense" else eps
        out, start = {}, 0
        for site in self.sites:
            size = math.prod(shapes[site])
            out[site] = flat[:, start:start + size].reshape((num,) + tuple(shapes[site]))
            start += size
        return out

    def record(self) -> dict:
        """The JSON-able description a checkpoint stores beside the arrays (`from_record` inverts it)."""
        return {"kind": self.kind, "sites": list(self.sites), "arrays": sorted(self.arrays), "perm": list(self.perm),
                "split": self.split, "meta": self.meta}

    @classmethod
    def from_record(cls, record: dict, arrays: dict) -> "Block":
        """The Block of `record` (from `record`) with its `arrays` {name: array}."""
        return cls(kind=record["kind"], sites=tuple(record["sites"]), arrays=dict(arrays),
                   perm=tuple(record["perm"]), split=int(record["split"]), meta=dict(record.get("meta") or {}))


FLOAT32_EIGH_ABOVE = 2000
"""Dense blocks larger than this are eigendecomposed in float32 (LAPACK's divide and conquer, about 3x faster
than float64 at P = 2000, and 4010 x 4010 float64 took 137 s on 2 shared cores): the eigenvalues' error, about
1e-7 ||GGN||, is negligible beside any prior precision the evidence or validation data choose."""


def dense_block(sites, matrix: np.ndarray) -> Block:
    """A ``"dense"`` block of the symmetric GGN `matrix` (P, P) over `sites` (eigendecomposed by LAPACK's divide
    and conquer, in float64 up to `FLOAT32_EIGH_ABOVE` parameters, in float32 above)."""
    matrix = np.asarray(matrix, np.float64 if len(matrix) <= FLOAT32_EIGH_ABOVE else np.float32)
    lam, vec = linalg.eigh(matrix, driver="evd")
    return Block("dense", tuple(sites), {"eigvals": np.asarray(lam, np.float64), "eigvecs": vec})


def diag_blocks(sites, diagonal: np.ndarray, shapes: dict) -> list:
    """One ``"diag"`` block per site of `sites` (each its own prior precision) from the GGN's diagonal (P,) over
    them all, in order; shapes: {site: shape}."""
    diagonal = np.asarray(diagonal, np.float64)
    ends = np.cumsum([math.prod(shapes[k]) for k in sites])
    return [Block("diag", (k,), {"eigvals": part}) for k, part in zip(sites, np.split(diagonal, ends[:-1]))]


def kfac_block(site: str, a: np.ndarray, g: np.ndarray, perm, split: int) -> Block:
    """A ``"kfac"`` block A (x) G of weight `site` (A (P_in, P_in), G (P_out, P_out); `perm`, `split` as in `Block`)."""
    eig_a, vec_a = np.linalg.eigh(np.asarray(a, np.float64))
    eig_g, vec_g = np.linalg.eigh(np.asarray(g, np.float64))
    return Block("kfac", (site,), {"eig_a": eig_a, "vec_a": vec_a, "eig_g": eig_g, "vec_g": vec_g},
                 tuple(int(i) for i in perm), int(split))
