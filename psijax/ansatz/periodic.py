"""FermiNet for a periodic cell: the electron gas (``psijax.system.ElectronGas``).

The network is FermiNet's (``psijax.ansatz.ferminet``) on inputs that repeat with the
cell, and its orbitals are the network's output times plane waves instead of envelopes
around nuclei. With the cell's reciprocal vectors b_i (b_i . a_j = 2 pi delta_ij):

- one electron: cos(b_i . r) and sin(b_i . r), i = 1..3 (6 features);
- two electrons, w_i = b_i . (r_1 - r_2): 1 - cos(w_i), sin(w_i) and log(1 + d), with the
  periodic distance d^2 = sum_ij (a_i . a_j / 4 pi^2) [(1 - cos w_i)(1 - cos w_j) +
  sin w_i sin w_j]: zero only on a lattice vector, |r_1 - r_2| near it (the cusp), smooth
  elsewhere (7 features);
- orbital j of electron i in determinant k: (delta_ij + h_i . w_kj) cos(k_j . r_i + phase_j),
  the closed shells' real plane waves (``PlaneWaveDeterminant.orbitals``: 1, cos(k . r)
  and sin(k . r)), delta_ij 1 where orbital j is of electron i's spin (every orbital of the
  spin block without ``full_det``), else 0;
- the cusp Jastrow factor (``psijax.ansatz.jastrow``) of the periodic distances.

Every input and every plane wave is unchanged when an electron moves by a lattice vector,
so psi is exactly periodic in each electron, real, and antisymmetric as FermiNet is. The
projections w start at ``SCALE`` times FermiNet's (enough to tell the determinants
apart), so the network starts as the plane-wave determinant, the electron gas's
Hartree-Fock state, times the Jastrow factor: there is no pretraining to do.
"""

from __future__ import annotations

import dataclasses
import math

import jax.numpy as jnp
import numpy as np

from psijax.ansatz import jastrow as cusp
from psijax.ansatz import taps
from psijax.ansatz.ferminet import FermiNet
from psijax.system.electron_gas import log_of
from psijax.types import Array, Normal, Params

Vector = tuple[float, float, float]
Wave = tuple[float, float, float, float]  # k (1/bohr) and the phase of cos(k . r + phase)

# The orbital projections' start, relative to FermiNet's 1 / sqrt(width). The
# network's local energies at the start then average the plane-wave determinant's
# (its Hartree-Fock energy) within what the cusp factor adds (tests/test_periodic.py).
SCALE = 0.01


@dataclasses.dataclass(frozen=True)
class PlaneWaveHead:
    """Features -> orbitals (the network's output times plane waves) -> psi.

    ``waves`` holds (kx, ky, kz, phase) of every orbital: the up electrons' then the down
    electrons'. Parameters as ``OrbitalHead``'s projections (``"up": {"w"}``, ``"down":
    {"w"}``), so SPRING's taps (``psijax.ansatz.taps``) see the same paths."""

    n_up: int
    n_down: int
    waves: tuple[Wave, ...]
    n_determinants: int = 8
    full_det: bool = True
    complex_waves: bool = False  # exp(i k . r) and complex projections (a twist)

    def _spins(self):
        return (("up", 0, self.n_up), ("down", self.n_up, self.n_down))

    def init(self, normal: Normal, n_features: int, dtype) -> Params:
        n, k = self.n_up + self.n_down, self.n_determinants
        params = {}
        for spin, _, count in self._spins():
            if count:
                per_det = n if self.full_det else count
                scale = SCALE / math.sqrt(n_features)
                params[spin] = {"w": normal((n_features, k * per_det)) * scale}
                if self.complex_waves:
                    params[spin]["w_im"] = normal((n_features, k * per_det)) * scale
        return params

    def orbitals(
        self, params: Params, h: Array, r: Array, tapped: taps.Taps | None = None
    ) -> list[Array]:
        """Orbital matrices from features ``h: [n, width]`` at positions ``r: [n, 3]``:
        ``[[k, n, n]]`` with full_det, else ``[up, down]`` blocks."""
        waves = np.asarray(self.waves, np.float64).reshape(-1, 4)
        blocks = []
        for spin, start, count in self._spins():
            if count == 0:
                continue
            columns = slice(0, None) if self.full_det else slice(start, start + count)
            k = jnp.asarray(waves[columns, :3].T, r.dtype)
            phase = jnp.asarray(waves[columns, 3], r.dtype)
            sl = slice(start, start + count)
            # [count, orbitals]; with complex waves phase is 0: the plane waves themselves
            plane = jnp.exp(1j * (r[sl] @ k)) if self.complex_waves else jnp.cos(r[sl] @ k + phase)
            own = np.zeros(len(waves), np.float64)
            own[start : start + count] = 1.0
            delta = jnp.asarray(own[columns], r.dtype)  # 1 on this spin's own orbitals
            phi = taps.dense(h[sl], params[spin]["w"], tapped, ("orbitals", spin, "w"))
            if self.complex_waves:
                phi = phi + 1j * (h[sl] @ params[spin]["w_im"])
            phi = (delta + phi.reshape(count, self.n_determinants, -1)) * plane[:, None, :]
            blocks.append(jnp.transpose(phi, (1, 0, 2)))  # [k, count, orbitals]
        if self.full_det:
            return [jnp.concatenate(blocks, axis=1)]
        return blocks


def inputs(r: Array, vectors: np.ndarray) -> tuple[Array, Array, Array]:
    """Periodic features of one walker ``r: [n, 3]`` in the cell of lattice ``vectors``
    (rows, bohr): one-electron ``[n, 6]``, two-electron ``[n, n, 7]`` and the periodic
    distances ``[n, n]`` (0 on the diagonal, with a finite gradient there)."""
    n = r.shape[0]
    phase = r @ jnp.asarray(2.0 * np.pi * np.linalg.inv(vectors), r.dtype)  # [n, 3]: b_i . r
    h1 = jnp.concatenate([jnp.cos(phase), jnp.sin(phase)], axis=-1)
    eye = jnp.eye(n, dtype=r.dtype)
    h2, d2 = pair_features(phase[:, None, :] - phase[None, :, :], vectors)
    d = jnp.sqrt(d2 + eye) * (1.0 - eye)  # on the diagonal sqrt(1): no 0 / 0
    h2 = jnp.concatenate([h2, jnp.log1p(d)[..., None]], axis=-1)
    return h1, h2, d


def pair_features(w: Array, vectors: np.ndarray) -> tuple[Array, Array]:
    """For phase differences ``w`` [..., 3] (b_i . (r_1 - r_2)): the features 1 - cos(w_i)
    and sin(w_i) [..., 6] and the squared periodic distance d^2 [...] (module docstring)."""
    metric = jnp.asarray(vectors @ vectors.T / (4.0 * np.pi**2), w.dtype)
    u, v = 1.0 - jnp.cos(w), jnp.sin(w)
    d2 = jnp.einsum("...i,ij,...j->...", u, metric, u) + jnp.einsum(
        "...i,ij,...j->...", v, metric, v
    )
    return jnp.concatenate([u, v], axis=-1), d2


@dataclasses.dataclass(frozen=True)
class CellFermiNet(FermiNet):
    """What every FermiNet in a periodic cell shares: the cell, the cusp Jastrow factor of
    the periodic electron-electron distances, and its description; the orbitals are each
    subclass's (``_orbitals_words`` names them).

    Attributes (besides FermiNet's):
        lattice: the cell's three lattice vectors (bohr).
    """

    lattice: tuple[Vector, Vector, Vector] = ((1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0))

    def _jastrow(self, params: Params, r: Array) -> Array:
        _, _, d = inputs(r, np.asarray(self.lattice, np.float64))
        return cusp.exponent_of(params["jastrow"], d, self.n_up)

    def _orbitals_words(self) -> str:
        raise NotImplementedError

    def describe(self) -> str:
        widths = ", ".join(f"({a}, {b})" for a, b in self.layers)
        kind = "full" if self.full_det else "spin-block"
        extras = " + periodic Jastrow" * self.jastrow
        return (
            f"periodic FermiNet [{widths}]{extras}, {self.n_determinants} {kind} determinants "
            f"{self._orbitals_words()}"
        )


@dataclasses.dataclass(frozen=True)
class PeriodicFermiNet(CellFermiNet):
    """FermiNet for the electron gas (module docstring); all fields are static.

    Attributes (besides ``CellFermiNet``'s; ``nuclei`` is empty):
        waves: (kx, ky, kz, phase) of each orbital's plane wave, up electrons' first.
    """

    waves: tuple[Wave, ...] = ()
    twist: tuple[float, float, float] = (0.0, 0.0, 0.0)  # Gamma: real; else complex

    @property
    def is_complex(self) -> bool:
        return any(self.twist)

    @property
    def head(self) -> PlaneWaveHead:  # type: ignore[override]
        return PlaneWaveHead(
            self.n_up, self.n_down, self.waves, self.n_determinants, self.full_det,
            complex_waves=self.is_complex,
        )  # fmt: skip

    def log_psi(self, params: Params, r: Array) -> Array:
        """log psi = log|psi| + i arg psi (complex where a twist makes psi complex)."""
        return log_of(self.apply(params, r))

    def phase(self, params: Params, r: Array) -> Array:
        """arg psi (0 or pi for a real psi): what a complex psi's gradient needs besides
        log|psi| (``psijax.optim.gradient``)."""
        return jnp.imag(self.log_psi(params, r))

    def _input_widths(self) -> tuple[int, int]:
        return 6, 7

    def _inputs(self, r: Array) -> tuple[Array, Array, Array]:
        """The periodic features and, for the head, the positions themselves."""
        h1, h2, _ = inputs(r, np.asarray(self.lattice, np.float64))
        return h1, h2, r

    def _orbitals_words(self) -> str:
        twist = f", complex at twist {tuple(self.twist)}" if self.is_complex else ""
        return f"of plane-wave orbitals ({self.n_up} + {self.n_down}{twist})"


def from_config(system, config) -> PeriodicFermiNet:
    """The periodic FermiNet of the electron gas: its cell and the plane waves of its
    closed shells."""
    determinant = system.determinant()
    waves: list[Wave] = []
    for n in (system.n_up, system.n_down):
        if n:
            k, phase = determinant.orbitals(n)
            waves += [(*map(float, kk), float(p)) for kk, p in zip(k, phase, strict=True)]
    return PeriodicFermiNet(
        system.n_up, system.n_down, (), layers=config.layers,
        n_determinants=config.determinants, full_det=config.full_det, jastrow=config.jastrow,
        matmul_precision=config.matmul_precision, lattice=system.lattice.vectors,
        waves=tuple(waves), twist=system.twist,
    )  # fmt: skip
