"""What an evaluation measures of several states: matrices per walker, states at the end.

A multiplicative observable o (the dipole) has the matrix (Psi o o) Psi^-1 =
Psi diag(o(x^j)) Psi^-1 per walker, the energy and its components the matrices of
``psijax.hamiltonian.states``, S^2 the matrix (S^2 Psi) Psi^-1 with (S^2 Psi)_ij =
(S^2 psi_i)(x^j) (``spin_matrix``). Each step's walker means of every element go to
metrics.csv; at the end the mean matrices give each state's energy, the excitation
energies, the transition dipoles and the oscillator strengths from state 0 and each
state's <S^2> (``psijax.statistics.states``), with error bars from bootstrap resamples of
blocks of steps. The traces (the sum over the states) are the energy columns of an
ordinary evaluation.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from psijax.ansatz.states import SharedStates, States, scaled_matrix
from psijax.errors import InputError
from psijax.estimators import spin as spin_lib
from psijax.estimators.dipole import Dipole
from psijax.hamiltonian.states import StatesEnergy
from psijax.statistics import states as analysis
from psijax.statistics.states import matrix_names
from psijax.types import Array, Params

SUPPORTED = ("energy", "spin", "dipole")  # observables with a matrix for several states
AXES = ("x", "y", "z")
SPIN = "s2"  # the S^2 matrix's name in the metrics columns: s2_matrix_{i}_{j}


@dataclasses.dataclass(frozen=True)
class StatesObserved:
    """The evaluation's per-walker values of a K-state wavefunction and the states' values
    derived from their series (``derived``)."""

    k: int
    molecule: Any
    dipole: bool
    energy: StatesEnergy | None = None  # what ``local`` evaluates; not needed by ``derived``
    spin: bool = False
    name: str = "states"
    needs_rows: bool = True  # ``derived`` reads every step's row, not only the estimates

    @property
    def dipole_names(self) -> tuple[str, ...]:
        return tuple(f"dipole_{a}" for a in AXES) if self.dipole else ()

    @property
    def matrices(self) -> tuple[str, ...]:
        """The names of the K x K matrices evaluated per walker."""
        return ("energy", *self.dipole_names, *((SPIN,) if self.spin else ()))

    @property
    def columns(self) -> tuple[str, ...]:
        """The energy's columns (traces), then every matrix element."""
        names = [*self.energy.columns] if self.energy is not None else ["energy"]
        for name in self.matrices:
            names += matrix_names(name, self.k)
        return tuple(names)

    def local(self, params: Params, r: Array, key: Array | None = None) -> dict[str, Array]:
        dipole = Dipole(self.molecule)
        copies = self.energy.net.copies(r)
        per_copy = {
            name: jnp.stack([dipole.local(_At(x), {})[name] for x in copies])
            for name in self.dipole_names
        }
        mats = self.energy.matrices(params, r, key, per_copy)
        if self.spin:
            mats[SPIN] = spin_matrix(self.energy.net, params, r)
        out = {c: jnp.trace(mats[c]) for c in self.energy.columns}
        for name in self.matrices:
            out |= dict(zip(matrix_names(name, self.k), mats[name].reshape(-1), strict=True))
        return out

    def derived(self, table: dict, rows: list[dict]) -> dict[str, Any]:
        """Each state's energy (and with the spin its <S^2> beside it), the excitation
        energies and (with the dipole) transition dipoles |d_0k|^2 and oscillator
        strengths, with bootstrap error bars. A matrix without columns in ``rows`` (S^2 in
        an evaluation made before it had one) is left out."""
        k = self.k
        present = [n for n in self.matrices if not rows or matrix_names(n, k)[0] in rows[0]]
        series = {
            name: np.asarray([[float(r[n]) for n in matrix_names(name, k)] for r in rows])
            .reshape(-1, k, k)
            for name in present
        }  # fmt: skip
        if len(series["energy"]) < 2:
            return {}
        dipoles = tuple(n for n in self.dipole_names if n in series)
        spin = SPIN if SPIN in series else None
        value, error, _ = analysis.bootstrap(series, lambda m: analysis.spectrum(m, dipoles, spin))
        names = [(f"state_{i}_energy", "Ha") for i in range(k)]
        names += [(f"excitation_{i}", "Ha") for i in range(1, k)]
        if dipoles:
            names += [(f"transition_dipole2_0_{i}", "e^2 bohr^2") for i in range(1, k)]
            names += [(f"oscillator_strength_0_{i}", "") for i in range(1, k)]
            names.append(("oscillator_strength_sum", ""))
        if spin:
            names += [(f"state_{i}_s2", "") for i in range(k)]
        out = {
            n: {"mean": float(v), "error": float(e), "unit": unit}
            for (n, unit), v, e in zip(names, value, error, strict=True)
        }
        beside = [n for i in range(k) for n in (f"state_{i}_energy", f"state_{i}_s2") if n in out]
        return {n: out[n] for n in beside} | out  # each state's <S^2> beside its energy


def spin_matrix(net: States | SharedStates, params: Params, r: Array) -> Array:
    """The ``[K, K]`` S^2 matrix (S^2 Psi) Psi^-1 of one walker, (S^2 Psi)_ij =
    c psi_i(x^j) - sum_p psi_i(P_p x^j) (``psijax.estimators.spin``: c = S_z (S_z + 1) +
    N_down, P_p the exchanges of one up and one down electron): N_up N_down evaluations of
    each state at each copy. Formed from the swapped values themselves, scaled like
    ``scaled_matrix``, never from ratios to psi_i(x^j), so a state near its node at a copy
    does not overflow. For K states that are eigenfunctions of S^2 it is the same matrix at
    every walker."""
    n_up, n_down = net.base.n_up, net.base.n_down
    c = spin_lib.constant(n_up, n_down)
    if not (n_up and n_down):  # no exchanges: S^2 Psi = c Psi
        return c * jnp.eye(net.n_states, dtype=r.dtype)
    scaled, shift = scaled_matrix(net.matrix(params, r))
    exchanged = net.copies(r)[:, spin_lib.exchanges(n_up, n_down)]  # [K, P, N, 3]
    over_pairs = jax.vmap(net.each, in_axes=(None, 0))
    swapped = jax.vmap(over_pairs, in_axes=(None, 0))(params, exchanged)  # [copy, P, state]
    swapped = jax.tree.map(lambda a: jnp.transpose(a, (2, 0, 1)), swapped)  # [K, K, P]
    applied = c * scaled - jnp.sum(
        swapped.sign * jnp.exp(swapped.log_abs - shift[None, :, None]), axis=-1
    )
    # S = A M^-1  <=>  M^T S^T = A^T
    return jnp.linalg.solve(scaled.T, applied.T).T


@dataclasses.dataclass(frozen=True)
class _At:
    """The positions of one copy as the dipole's ``local`` reads them (``w.r``)."""

    r: Array


def build(
    names: tuple[str, ...], energy: StatesEnergy | int, molecule, *, given: bool
) -> StatesObserved:
    """The states' observables for the evaluation's ``names``: the energy always, the spin
    and the dipole if named; another observable named by the user (``given``) is refused,
    one of the defaults left out. ``energy`` may be the number of states alone where only
    ``derived`` is needed (a report)."""
    unsupported = [n for n in names if n not in SUPPORTED]
    if unsupported and given:
        raise InputError(
            f"{', '.join(unsupported)} cannot be evaluated for several states (no matrix form "
            f"here); choose from {', '.join(SUPPORTED)}"
        )
    dipole, spin = "dipole" in names, "spin" in names
    if isinstance(energy, int):
        return StatesObserved(energy, molecule, dipole, spin=spin)
    return StatesObserved(energy.net.n_states, molecule, dipole, energy, spin=spin)
