"""Potentials and the local energy, in Hartree, for one walker (positions in bohr).

    E_L(r) = -1/2 (lap log|psi| + |grad log|psi||^2) + V(r)

The kinetic part comes from a ``psijax.laplacian`` operator passed in as an
object; there is no second Laplacian here.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import jax.numpy as jnp
import numpy as np

from psijax.laplacian import LaplacianOperator
from psijax.system import Molecule
from psijax.types import Array, Params

Potential = Callable[[Array], Array]  # one walker [n_electrons, 3] -> V in Hartree
LogAbs = Callable[[Params, Array], Array]  # (params, one walker) -> log|psi|


def coulomb_potential(molecule: Molecule) -> Potential:
    """Electron-electron + electron-nucleus + nucleus-nucleus Coulomb energy."""
    nuclei = np.asarray(molecule.nuclear_positions, np.float64)
    charges = np.asarray(molecule.nuclear_charges, np.float64)
    e_nn = float(molecule.nuclear_repulsion)

    def potential(r: Array) -> Array:
        n = r.shape[0]
        r_en = jnp.linalg.norm(r[:, None, :] - jnp.asarray(nuclei, r.dtype)[None], axis=-1)
        v_en = -jnp.sum(jnp.asarray(charges, r.dtype)[None] / r_en)
        i, j = np.triu_indices(n, k=1)
        v_ee = jnp.sum(1.0 / jnp.linalg.norm(r[i] - r[j], axis=-1)) if n > 1 else 0.0
        return v_en + v_ee + jnp.asarray(e_nn, r.dtype)

    return potential


def kinetic_energy(op: LaplacianOperator, log_abs: LogAbs, params: Params, r: Array) -> Array:
    """-1/2 (lap + |grad|^2) of log|psi| = -1/2 (lap psi) / psi."""
    _, grad, lap = op(functools.partial(log_abs, params))(r)
    return -0.5 * (lap + jnp.sum(grad**2))


def make_local_energy(
    log_abs: LogAbs, potential: Potential, op: LaplacianOperator
) -> Callable[[Params, Array], Array]:
    """``local_energy(params, r)`` in Hartree for one walker."""

    def local_energy(params: Params, r: Array) -> Array:
        return kinetic_energy(op, log_abs, params, r) + potential(r)

    return local_energy
