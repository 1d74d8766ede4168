"""<S^2> from ratios of psi with one up and one down electron exchanged:

    S^2 = S_z (S_z + 1) + N_down - sum_{i up, j down} psi(r with r_i <-> r_j) / psi(r),

exact for any state whose spatial part has the given up/down assignment. ``constant`` and
``exchanges`` are the two parts of that operator; the matrix of several states
(``psijax.estimators.states``) applies them to each state at each copy of the electrons.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from psijax.hamiltonian import Walker
from psijax.system import Molecule
from psijax.types import Array


def constant(n_up: int, n_down: int) -> float:
    """S_z (S_z + 1) + N_down: the part of S^2 that multiplies psi."""
    s_z = 0.5 * (n_up - n_down)
    return s_z * (s_z + 1.0) + n_down


def exchanges(n_up: int, n_down: int) -> np.ndarray:
    """``[n_up * n_down, N]``: the electron order of each exchange of one up electron
    (the first ``n_up``) with one down electron; ``r[perm]`` is the exchanged walker."""
    i, j = np.meshgrid(np.arange(n_up), n_up + np.arange(n_down), indexing="ij")
    i, j = i.reshape(-1), j.reshape(-1)
    perm = np.tile(np.arange(n_up + n_down), (i.size, 1))
    perm[np.arange(i.size), i] = j
    perm[np.arange(i.size), j] = i
    return perm


@dataclasses.dataclass(frozen=True)
class Spin:
    """<S^2> (dimensionless; 0 for a singlet, 3/4 for a doublet)."""

    molecule: Molecule
    name: str = "spin"
    needs_derivatives: bool = False

    @property
    def columns(self) -> tuple[str, ...]:
        return ("s2",)

    def local(self, w: Walker, parts: dict[str, Array]) -> dict[str, Array]:
        n_up, n_down = self.molecule.n_up, self.molecule.n_down
        c = constant(n_up, n_down)
        if n_up == 0 or n_down == 0:
            return {"s2": jnp.asarray(c, w.r.dtype)}
        perm = exchanges(n_up, n_down)
        swapped = jax.vmap(functools.partial(w.wf.apply, w.params))(w.r[perm])  # [pairs]
        # psi'/psi: the signs' quotient is one times the other's conjugate (|sign| = 1); of
        # a complex psi the real part, whose mean is <S^2> (the imaginary part's is 0)
        ratio = swapped.sign * jnp.conj(w.psi.sign) * jnp.exp(swapped.log_abs - w.psi.log_abs)
        return {"s2": c - jnp.sum(jnp.real(ratio))}

    def derived(self, means: dict[str, Any]) -> dict[str, Any]:
        return {}


def from_config(molecule: Molecule, network=None) -> Spin:
    return Spin(molecule)
