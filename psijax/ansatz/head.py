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

import jax
import jax.numpy as jnp
import numpy as np

from psijax.ansatz import slogdet as slogdet_lib
from psijax.ansatz import taps
from psijax.types import Array, Normal, Params, Psi


@dataclasses.dataclass(frozen=True)
class OrbitalHead:
    n_up: int
    n_down: int
    n_atoms: int
    n_determinants: int = 8
    full_det: bool = True
    decay_floor: float = 0.0  # 1/bohr: no envelope decays slower (``ENVELOPE_FLOOR``)

    def _spins(self):
        return (("up", 0, self.n_up), ("down", self.n_up, self.n_down))

    def init(self, normal: Normal, n_features: int, dtype) -> Params:
        """Projection weights and envelope exponents (sigma) and weights (pi) per spin;
        ``normal(shape)`` hands out fresh standard-normal draws of ``dtype``."""
        n, m, k = self.n_up + self.n_down, self.n_atoms, self.n_determinants
        params = {}
        for spin, _, count in self._spins():
            if count == 0:
                continue
            per_det = n if self.full_det else count
            w = normal((n_features, k * per_det)) / math.sqrt(n_features)
            params[spin] = {"w": w}
            params[spin + "_sigma"] = jnp.ones((m, k * per_det), dtype)
            params[spin + "_pi"] = jnp.ones((m, k * per_det), dtype)
        return params

    def orbitals(
        self, params: Params, h: Array, r_ae: Array, tapped: taps.Taps | None = None
    ) -> list[Array]:
        """Orbital matrices from features ``h: [n, n_features]`` and electron-nucleus distances
        ``r_ae: [n, atoms]``: ``[[k, n, n]]`` with full_det, else ``[up, down]`` blocks;
        ``tapped``: the projections are tapped (``psijax.ansatz.taps``)."""
        k = self.n_determinants
        blocks = []
        for spin, start, count in self._spins():
            if count == 0:
                continue
            sl = slice(start, start + count)
            # [count, k * orbitals per determinant]
            phi = taps.dense(h[sl], params[spin]["w"], tapped, ("orbitals", spin, "w"))
            env = envelope(
                r_ae[sl], params[spin + "_sigma"], params[spin + "_pi"], self.decay_floor
            )
            phi = (phi * env).reshape(count, k, -1)  # [count, k, orbitals]
            blocks.append(jnp.transpose(phi, (1, 0, 2)))  # [k, count, orbitals]
        if self.full_det:
            return [jnp.concatenate(blocks, axis=1)]  # [k, n, n]
        return blocks

    def fit(
        self, params: Params, h: Array, r_ae: Array, targets: list[Array], ridge: float
    ) -> Params:
        """``params`` with every projection ``w`` the least-squares fit of the orbitals to
        ``targets`` at fixed features and envelopes, over all walkers given.

        h: ``[W, n, n_features]`` and r_ae: ``[W, n, atoms]``, as ``orbitals`` takes them
        per walker; targets: what ``orbitals`` returns per walker with its determinant
        axis dropped (``[W, n, n]`` with full_det, else ``[W, up, up]`` and ``[W, down,
        down]``), one target for every determinant, or with it (``[W, k, ...]``), a target
        per determinant. The orbitals are linear in ``w``, so each determinant's orbital column
        is an independent linear least-squares problem over walkers and electrons; its
        ``ridge`` (relative to the column's mean squared design entry) pulls the column
        towards its current ``w``, where the walkers do not determine it.
        """
        k, new = self.n_determinants, dict(params)
        for spin, start, count in self._spins():
            if count == 0:
                continue
            block = self._block_targets(targets, spin, start, count)  # [W, count, per_det]
            sl = slice(start, start + count)
            feats = h[:, sl].reshape(-1, h.shape[-1])  # [S, F] over walkers and electrons
            env = jax.vmap(envelope, (0, None, None, None))(
                r_ae[:, sl], params[spin + "_sigma"], params[spin + "_pi"], self.decay_floor
            ).reshape(feats.shape[0], -1)  # [S, k * per_det]
            if block.ndim == 4:  # a target per determinant: [W, k, count, per_det]
                goal = jnp.moveaxis(block, 1, 2).reshape(feats.shape[0], -1)
            else:  # one for all determinants
                goal = jnp.tile(block.reshape(feats.shape[0], -1), (1, k))  # [S, k * per_det]
            gram = _weighted_grams(env**2, feats)  # [columns, F, F]
            rhs = jnp.einsum("sc,sf->cf", env * goal, feats)  # [columns, F]
            w = params[spin]["w"]  # [F, columns]
            scale = jnp.trace(gram, axis1=1, axis2=2) / feats.shape[-1]  # [columns]
            lam = ridge * jnp.maximum(scale, jnp.finfo(gram.dtype).tiny)[:, None]
            eye = jnp.eye(feats.shape[-1], dtype=gram.dtype)
            solved = jnp.linalg.solve(gram + lam[:, :, None] * eye, (rhs + lam * w.T)[..., None])
            new[spin] = {**params[spin], "w": solved[..., 0].T.astype(w.dtype)}
        return new

    def _block_targets(self, targets: list[Array], spin: str, start: int, count: int) -> Array:
        """The rows of ``targets`` that this spin's electrons' orbitals are fitted to."""
        if self.full_det:
            return targets[0][..., start : start + count, :]
        return targets[0 if spin == "up" or self.n_up == 0 else 1]

    def with_decays(self, params: Params, decays: Array) -> Params:
        """``params`` with every envelope exponent of orbital column ``j`` (in every
        determinant and around every nucleus) set to ``decays[j]``: ``[n]`` with full_det,
        else ``[n_up + n_down]``, the up orbitals' then the down orbitals'."""
        new = dict(params)
        for spin, start, count in self._spins():
            if count == 0:
                continue
            own = decays if self.full_det else decays[start : start + count]
            sigma = params[spin + "_sigma"]  # made on the host: nothing to compile
            tiled = np.tile(np.asarray(own, sigma.dtype), self.n_determinants)
            new[spin + "_sigma"] = jax.device_put(np.broadcast_to(tiled, sigma.shape))
        return new


def _weighted_grams(weights: Array, feats: Array) -> Array:
    """``einsum("sc,sf,sg->cfg", weights, feats, feats)``: one product of the weights with
    the rows' outer products, their upper triangle only (the Grams are symmetric), gathered
    into full matrices. Half the einsum's work; N2's whole fit took 76 ms per pretraining
    step against 125 ms on a 2-core CPU, and the gather (instead of a scatter into the
    triangle plus its transpose) made N2's pretraining step 0.89x as long (docs/benchmarks.md,
    "N2's launch")."""
    n = feats.shape[-1]
    rows, cols = np.triu_indices(n)
    upper = weights.T @ (feats[:, rows] * feats[:, cols])  # [columns, n (n + 1) / 2]
    where = np.empty((n, n), np.int32)  # (i, j) -> the column of upper holding it
    where[rows, cols] = where[cols, rows] = np.arange(rows.size)
    return upper[:, where]


# 1/bohr: no envelope of a neutral or positive molecule's ground state decays slower
# (``envelope_floor``). Far from the nuclei a bound electron's psi falls as
# exp(-sqrt(2 IP) r); with the first ionisation energy of every neutral atom (caesium's
# 3.9 eV the lowest) that is at least 0.53/bohr. Where training let one envelope decay
# at 0.1-0.2/bohr (LiH, seed 0), psi kept a tail far from the molecule that the walkers
# rarely reached, but one that did stayed there for hundreds of steps with a local energy
# about 1 Ha too high: the energy rose 3 mHa for as long (docs/curves.md, "What a scan
# costs"). An anion's or an excited state's outer electron decays more slowly than this:
# those take no floor.
ENVELOPE_FLOOR = 0.5


def envelope_floor(molecule, config) -> float:
    """``ENVELOPE_FLOOR`` for the ground state of a molecule of charge >= 0, else none."""
    return ENVELOPE_FLOOR if molecule.charge >= 0 and config.states == 1 else 0.0


def envelope(r_ae: Array, sigma: Array, pi: Array, floor: float = 0.0) -> Array:
    """Isotropic exponential envelope: sum_m pi_mo exp(-max(|sigma_mo|, floor) r_im)
    -> [count, orbitals]. An exponent below ``floor`` acts as the floor, with no gradient."""
    decay = jnp.maximum(jnp.abs(sigma), floor) if floor else jnp.abs(sigma)
    return jnp.einsum("imo,mo->io", jnp.exp(-r_ae[:, :, None] * decay[None]), pi)


def determinants(matrices: list[Array], groups: int | None = None) -> Psi:
    """psi = sum_k prod_blocks det(M_k) as sign and log|psi|; with ``groups`` the
    determinants split into that many equal consecutive groups, one psi ``[groups]`` each."""
    signs, logdets = None, None
    for mat in matrices:
        s, ld = slogdet_lib.slogdet(mat)
        signs = s if signs is None else signs * s
        logdets = ld if logdets is None else logdets + ld
    if groups is not None:
        signs, logdets = signs.reshape(groups, -1), logdets.reshape(groups, -1)
    return signed_logsumexp(signs, logdets)


def signed_logsumexp(signs: Array, logs: Array) -> Psi:
    """log|sum_k s_k exp(l_k)| and its sign, stable for any spread of l_k."""
    if logs.shape[-1] == 1:
        return Psi(signs[..., 0], logs[..., 0])
    shift = jax.lax.stop_gradient(jnp.max(logs, axis=-1))
    total = jnp.sum(signs * jnp.exp(logs - shift[..., None]), axis=-1)
    if not jnp.iscomplexobj(total):
        return Psi(jnp.sign(total), jnp.log(jnp.abs(total)) + shift)
    # a complex sum: its sign is its phase total / |total| (JAX's sign has no derivative
    # for it), and |total| from the real and imaginary parts (folx's rule for abs of a
    # complex value keeps the real part of the wrong product)
    size = jnp.sqrt(jnp.real(total) ** 2 + jnp.imag(total) ** 2)
    return Psi(total / size, jnp.log(size) + shift)
