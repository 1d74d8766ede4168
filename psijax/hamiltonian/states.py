"""The local energy matrix of K states (NES-VMC) from the one Hamiltonian.

With Psi_ij = psi_i(x^j) (state i, copy j) and (H Psi)_ij = (H psi_i)(x^j), the local
energy matrix of one walker is

    E_L = (H Psi) Psi^-1 = (Psi o e) Psi^-1,     e_ij = (H psi_i)(x^j) / psi_i(x^j),

``e_ij`` being the ordinary local energy of state i at copy j (``psijax.hamiltonian``: every
term of the run's Hamiltonian, the kinetic energy through its Laplacian operator). For
exact eigenstates (or any K states spanning them) E_L is the same matrix at every walker,
with the energies as eigenvalues; its average under |det Psi|^2 gives the energies of a
trained wavefunction (``psijax.statistics.states``). Its trace is the local energy of Psi
under the Hamiltonian summed over the copies: what training minimises.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

from psijax.ansatz.states import SharedStates, States, scaled_matrix
from psijax.hamiltonian.base import Hamiltonian, PsiFunctions
from psijax.types import Array, Params

MATRIX = "energy_matrix"  # the name of the loss's per-walker [K, K] extra output


@dataclasses.dataclass(frozen=True)
class StatesEnergy:
    """``energy(params, r, key=None)``: the trace of the energy matrix of one walker of
    ``net`` (Hartree); ``matrices`` gives every component's matrix."""

    hamiltonian: Hamiltonian
    net: States | SharedStates

    @property
    def needs_key(self) -> bool:
        return self.hamiltonian.needs_key

    @property
    def columns(self) -> tuple[str, ...]:
        return self.hamiltonian.columns

    def pairs(self, params: Params, r: Array, key: Array | None = None) -> dict[str, Array]:
        """Every component of the local energy of state i at copy j, ``[K, K]`` each: at
        each copy, every term for all states at once (``net.each``: with one shared network
        one Laplacian of its K outputs; a potential that psi does not enter, computed once
        for all states), one random key per copy."""
        k = self.net.n_states
        psi = PsiFunctions(lambda p, x: self.net.each(p, x).log_abs, self.net.each)
        local = self.hamiltonian.local_energy(psi)
        keys = jax.random.split(key, k) if self.needs_key else None
        # one copy after the other: batched over walkers, each pass keeps the batch of a
        # ground state's (a batch K times larger spills the caches: LiH's K = 4 took twice
        # the time of four passes on a 2-core CPU)
        parts = jax.lax.map(
            lambda xk: local.parts(params, xk[0], xk[1]), (self.net.copies(r), keys)
        )  # {component: [copy] or [copy, state]}
        return {c: jnp.broadcast_to(v.reshape(k, -1), (k, k)).T for c, v in parts.items()}

    def matrices(
        self, params: Params, r: Array, key: Array | None = None,
        per_copy: dict[str, Array] | None = None,
    ) -> dict[str, Array]:  # fmt: skip
        """``{column: [K, K] matrix}`` for the energy and each of its components, the matrix
        of column c being (Psi o c) Psi^-1 (the energy's is the sum of the others), and for
        each multiplicative observable of ``per_copy`` (``{name: [K]}``, its value at each
        copy) Psi diag(o) Psi^-1; one evaluation of Psi and one factorisation for all."""
        scaled, _ = scaled_matrix(self.net.matrix(params, r))
        parts = self.pairs(params, r, key)
        numerators = {c: scaled * parts[c] for c in self.columns}
        numerators |= {name: scaled * o[None, :] for name, o in (per_copy or {}).items()}
        # E = A M^-1  <=>  M^T E^T = A^T
        stacked = jnp.stack(list(numerators.values()))  # [C, K, K]
        solved = jnp.linalg.solve(scaled.T[None], jnp.swapaxes(stacked, -1, -2))
        return dict(zip(numerators, jnp.swapaxes(solved, -1, -2), strict=True))

    def matrix(self, params: Params, r: Array, key: Array | None = None) -> Array:
        """The ``[K, K]`` local energy matrix of one walker (Hartree)."""
        return self.matrices(params, r, key)["energy"]

    def with_aux(
        self, params: Params, r: Array, key: Array | None = None
    ) -> tuple[Array, dict[str, Array]]:
        """The trace (the total local energy) and ``{MATRIX: [K, K]}``."""
        m = self.matrix(params, r, key)
        return jnp.trace(m), {MATRIX: m}

    def __call__(self, params: Params, r: Array, key: Array | None = None) -> Array:
        return jnp.trace(self.matrix(params, r, key))


def local_energy(hamiltonian: Hamiltonian, net: States | SharedStates) -> StatesEnergy:
    return StatesEnergy(hamiltonian, net)
