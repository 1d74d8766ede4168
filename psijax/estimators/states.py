"""What an evaluation measures of several states: matrices per walker, states at the end.

A multiplicative observable o (the dipole) has the matrix (Psi o o) Psi^-1 =
Psi diag(o(x^j)) Psi^-1 per walker, the energy and its components the matrices of
``psijax.hamiltonian.states``. Each step's walker means of every element go to metrics.csv; at
the end the mean matrices give each state's energy, the excitation energies, the
transition dipoles and the oscillator strengths from state 0 (``psijax.statistics.states``),
with error bars from bootstrap resamples of blocks of steps. The traces (the sum over
the states) are the energy columns of an ordinary evaluation.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax.numpy as jnp
import numpy as np

from psijax.errors import InputError
from psijax.estimators.dipole import Dipole
from psijax.hamiltonian.states import StatesEnergy
from psijax.statistics import states as analysis
from psijax.statistics.states import matrix_names
from psijax.types import Array, Params

SUPPORTED = ("energy", "dipole")  # observables with a matrix for several states
AXES = ("x", "y", "z")


@dataclasses.dataclass(frozen=True)
class StatesObserved:
    """The evaluation's per-walker values of a K-state wavefunction and the states' values
    derived from their series (``derived``)."""

    k: int
    molecule: Any
    dipole: bool
    energy: StatesEnergy | None = None  # what ``local`` evaluates; not needed by ``derived``
    name: str = "states"
    needs_rows: bool = True  # ``derived`` reads every step's row, not only the estimates

    @property
    def dipole_names(self) -> tuple[str, ...]:
        return tuple(f"dipole_{a}" for a in AXES) if self.dipole else ()

    @property
    def columns(self) -> tuple[str, ...]:
        """The energy's columns (traces), then every matrix element."""
        names = [*self.energy.columns] if self.energy is not None else ["energy"]
        for name in ("energy", *self.dipole_names):
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
        out = {c: jnp.trace(mats[c]) for c in self.energy.columns}
        for name in ("energy", *self.dipole_names):
            out |= dict(zip(matrix_names(name, self.k), mats[name].reshape(-1), strict=True))
        return out

    def derived(self, table: dict, rows: list[dict]) -> dict[str, Any]:
        """Each state's energy, the excitation energies and (with the dipole) transition
        dipoles |d_0k|^2 and oscillator strengths, with bootstrap error bars."""
        k = self.k
        series = {
            name: np.asarray([[float(r[n]) for n in matrix_names(name, k)] for r in rows])
            .reshape(-1, k, k)
            for name in ("energy", *self.dipole_names)
        }  # fmt: skip
        if len(series["energy"]) < 2:
            return {}
        value, error, _ = analysis.bootstrap(
            series, lambda m: analysis.spectrum(m, self.dipole_names)
        )
        names = [(f"state_{i}_energy", "Ha") for i in range(k)]
        names += [(f"excitation_{i}", "Ha") for i in range(1, k)]
        if self.dipole:
            names += [(f"transition_dipole2_0_{i}", "e^2 bohr^2") for i in range(1, k)]
            names += [(f"oscillator_strength_0_{i}", "") for i in range(1, k)]
            names.append(("oscillator_strength_sum", ""))
        return {
            n: {"mean": float(v), "error": float(e), "unit": unit}
            for (n, unit), v, e in zip(names, value, error, strict=True)
        }


@dataclasses.dataclass(frozen=True)
class _At:
    """The positions of one copy as the dipole's ``local`` reads them (``w.r``)."""

    r: Array


def build(
    names: tuple[str, ...], energy: StatesEnergy | int, molecule, *, given: bool
) -> StatesObserved:
    """The states' observables for the evaluation's ``names``: the energy always, the dipole
    if named; another observable named by the user (``given``) is refused, one of the
    defaults left out. ``energy`` may be the number of states alone where only ``derived``
    is needed (a report)."""
    unsupported = [n for n in names if n not in SUPPORTED]
    if unsupported and given:
        raise InputError(
            f"{', '.join(unsupported)} cannot be evaluated for several states (no matrix form "
            f"here); choose from {', '.join(SUPPORTED)}"
        )
    if isinstance(energy, int):
        return StatesObserved(energy, molecule, "dipole" in names)
    return StatesObserved(energy.net.n_states, molecule, "dipole" in names, energy)
