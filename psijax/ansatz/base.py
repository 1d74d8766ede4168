"""What every wavefunction gives the rest of psijax: the ``Ansatz`` protocol.

An ansatz is a frozen dataclass whose fields fix every shape. The training step, the
Hamiltonian, the samplers and evaluation use ``init``/``apply``/``log_abs``; Hartree-Fock
pretraining uses ``orbitals`` with ``n_determinants`` and ``full_det``. A new ansatz is
one file in ``psijax/ansatz/`` and one entry in ``psijax.registry.ANSATZES``; nothing in
the step, loss or loop changes. Both ansaetze here end in the shared orbital head
(``psijax.ansatz.head``).
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from psijax.types import Array, Params, Psi


@runtime_checkable
class Ansatz(Protocol):
    """A wavefunction for ONE walker ``r: [n_electrons, 3]`` (bohr); callers vmap."""

    n_up: int  # electrons r[:n_up] are spin up
    n_down: int
    n_determinants: int
    full_det: bool  # one N x N determinant per term, or an up and a down determinant

    def init(self, key: Array, dtype=...) -> Params:
        """Random parameters of the given float dtype."""

    def apply(self, params: Params, r: Array) -> Psi:
        """psi(r) as ``Psi(sign, log|psi|)``."""

    def log_abs(self, params: Params, r: Array) -> Array:
        """log|psi(r)|; what sampling and the local energy use."""

    def orbitals(self, params: Params, r: Array) -> list[Array]:
        """The orbital matrices, each ``[n_determinants, n, n]``: one (full_det) or up and
        down; pretraining fits them to Hartree-Fock orbitals."""

    def describe(self) -> str:
        """One line for the run header, e.g. 'FermiNet 3 x (64, 16), 8 determinants'."""
