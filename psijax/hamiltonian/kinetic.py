"""The kinetic energy: -1/2 (lap psi) / psi = -1/2 (lap log|psi| + |grad log|psi||^2), for a
complex psi the real part of -1/2 (lap log psi + (grad log psi)^2)."""

from __future__ import annotations

import dataclasses

import jax.numpy as jnp

from psijax.hamiltonian.base import Walker, psi_functions
from psijax.laplacian import LaplacianOperator
from psijax.types import Array, LogAbs, Params


@dataclasses.dataclass(frozen=True)
class Kinetic:
    """The electrons' kinetic energy through the Hamiltonian's Laplacian operator."""

    components: tuple[str, ...] = ("kinetic",)
    needs_key: bool = False

    def __call__(self, walker: Walker, key: Array | None = None) -> dict[str, Array]:
        # over the electrons' coordinates: one value per output of a psi with several; of a
        # complex psi the real part (the imaginary one: ``base.imaginary_kinetic``)
        value = -0.5 * (walker.lap + jnp.sum(walker.grad**2, axis=(-2, -1)))
        return {"kinetic": jnp.real(value)}


def kinetic_energy(op: LaplacianOperator, log_abs: LogAbs, params: Params, r: Array) -> Array:
    """The kinetic energy of one walker ``r`` under ``log_abs(params, r)`` through ``op``."""
    return Kinetic()(Walker(psi_functions(log_abs), params, r, op))["kinetic"]


def from_config(molecule, config) -> Kinetic:
    return Kinetic()
