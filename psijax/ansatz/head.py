"""The orbital head every ansatz shares: features -> orbitals -> determinants -> psi.

Each electron's final features are projected to ``n_determinants`` orbitals (N of them
per determinant with ``full_det``, else as many as that spin has electrons), multiplied
by isotropic exponential envelopes around the nuclei, and psi is the signed sum of the
determinants (a product of an up and a down determinant without ``full_det``), kept in
log space.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

import jax
import jax.numpy as jnp

from psijax.types import Array, Params, Psi


@dataclasses.dataclass(frozen=True)
class OrbitalHead:
    n_up: int
    n_down: int
    n_atoms: int
    n_determinants: int = 8
    full_det: bool = True

    def _spins(self):
        return (("up", 0, self.n_up), ("down", self.n_up, self.n_down))

    def init(self, next_key: Callable[[], Array], n_features: int, dtype) -> Params:
        """Projection weights and envelope exponents (sigma) and weights (pi) per spin;
        ``next_key()`` hands out one fresh key per random array."""
        n, m, k = self.n_up + self.n_down, self.n_atoms, self.n_determinants
        params = {}
        for spin, _, count in self._spins():
            if count == 0:
                continue
            per_det = n if self.full_det else count
            w = jax.random.normal(next_key(), (n_features, k * per_det), dtype)
            w = w / math.sqrt(n_features)
            params[spin] = {"w": w}
            params[spin + "_sigma"] = jnp.ones((m, k * per_det), dtype)
            params[spin + "_pi"] = jnp.ones((m, k * per_det), dtype)
        return params

    def orbitals(self, params: Params, h: Array, r_ae: Array) -> list[Array]:
        """Orbital matrices from features ``h: [n, n_features]`` and electron-nucleus distances
        ``r_ae: [n, atoms]``: ``[[k, n, n]]`` with full_det, else ``[up, down]`` blocks."""
        k = self.n_determinants
        blocks = []
        for spin, start, count in self._spins():
            if count == 0:
                continue
            sl = slice(start, start + count)
            phi = h[sl] @ params[spin]["w"]  # [count, k * orbitals per determinant]
            env = envelope(r_ae[sl], params[spin + "_sigma"], params[spin + "_pi"])
            phi = (phi * env).reshape(count, k, -1)  # [count, k, orbitals]
            blocks.append(jnp.transpose(phi, (1, 0, 2)))  # [k, count, orbitals]
        if self.full_det:
            return [jnp.concatenate(blocks, axis=1)]  # [k, n, n]
        return blocks


def envelope(r_ae: Array, sigma: Array, pi: Array) -> Array:
    """Isotropic exponential envelope: sum_m pi_mo exp(-|sigma_mo| r_im) -> [count, orbitals]."""
    return jnp.einsum("imo,mo->io", jnp.exp(-r_ae[:, :, None] * jnp.abs(sigma)[None]), pi)


def determinants(matrices: list[Array]) -> Psi:
    """psi = sum_k prod_blocks det(M_k) as sign and log|psi|."""
    signs, logdets = None, None
    for mat in matrices:
        s, ld = jnp.linalg.slogdet(mat)
        signs = s if signs is None else signs * s
        logdets = ld if logdets is None else logdets + ld
    return signed_logsumexp(signs, logdets)


def signed_logsumexp(signs: Array, logs: Array) -> Psi:
    """log|sum_k s_k exp(l_k)| and its sign, stable for any spread of l_k."""
    if logs.shape[-1] == 1:
        return Psi(signs[..., 0], logs[..., 0])
    shift = jax.lax.stop_gradient(jnp.max(logs, axis=-1))
    total = jnp.sum(signs * jnp.exp(logs - shift[..., None]), axis=-1)
    return Psi(jnp.sign(total), jnp.log(jnp.abs(total)) + shift)
