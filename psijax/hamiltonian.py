"""The local energy as a sum of terms, in Hartree, for one walker (positions in bohr).

    E_L(r) = sum_t E_t(params, r, key; psi),   e.g.
    kinetic  -1/2 (lap log|psi| + |grad log|psi||^2)   (``Kinetic``)
    Coulomb  electron-nucleus + electron-electron + nucleus-nucleus   (``Potential``)

A term is called with the wavefunction (``log_abs`` and ``apply -> Psi``), the parameters,
the walker and a random key, so that a nonlocal term (a pseudopotential) can evaluate psi
at moved electrons and draw its quadrature; a term that uses the key says so
(``needs_key``) and the training step then hands every walker its own key. The kinetic
term's Laplacian comes from a ``psijax.laplacian`` operator passed in as an object;
there is no second Laplacian here.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Sequence
from typing import NamedTuple, Protocol

import jax
import jax.numpy as jnp
import numpy as np

from psijax.laplacian import LaplacianOperator
from psijax.system import Molecule
from psijax.types import Array, LogAbs, Params, Psi, WavefunctionApply

Potential = Callable[[Array], Array]  # one walker [n_electrons, 3] -> V in Hartree


class PsiFunctions(NamedTuple):
    """What a term sees of psi: ``log_abs(params, r)`` and ``apply(params, r) -> Psi``."""

    log_abs: LogAbs
    apply: WavefunctionApply


def psi_functions(psi: object) -> PsiFunctions:
    """An ansatz (anything with ``log_abs`` and ``apply``) or a bare log|psi| function."""
    if hasattr(psi, "log_abs") and hasattr(psi, "apply"):
        return PsiFunctions(psi.log_abs, psi.apply)
    log_abs = psi
    return PsiFunctions(log_abs, lambda params, r: Psi(jnp.ones((), r.dtype), log_abs(params, r)))


class Term(Protocol):
    """One part of the local energy of one walker, in Hartree."""

    needs_key: bool

    def __call__(self, psi: PsiFunctions, params: Params, r: Array, key: Array | None) -> Array: ...


@dataclasses.dataclass(frozen=True)
class Kinetic:
    """-1/2 (lap psi) / psi through a Laplacian operator."""

    op: LaplacianOperator
    needs_key: bool = False

    def __call__(self, psi: PsiFunctions, params: Params, r: Array, key=None) -> Array:
        return kinetic_energy(self.op, psi.log_abs, params, r)


@dataclasses.dataclass(frozen=True)
class LocalPotential:
    """A local (multiplicative) potential V(r)."""

    potential: Potential
    needs_key: bool = False

    def __call__(self, psi: PsiFunctions, params: Params, r: Array, key=None) -> Array:
        return self.potential(r)


class LocalEnergy(Protocol):
    """``local_energy(params, r, key=None)`` in Hartree for one walker."""

    needs_key: bool

    def __call__(self, params: Params, r: Array, key: Array | None = None) -> Array: ...


@dataclasses.dataclass(frozen=True)
class SumOfTerms:
    """The local energy of ``psi`` as the sum of ``terms``; see the module docstring."""

    psi: PsiFunctions
    terms: tuple[Term, ...]

    @property
    def needs_key(self) -> bool:
        return any(t.needs_key for t in self.terms)

    def __call__(self, params: Params, r: Array, key: Array | None = None) -> Array:
        keys = [None] * len(self.terms)
        if self.needs_key:
            keys = list(jax.random.split(key, len(self.terms)))
        values = [t(self.psi, params, r, k) for t, k in zip(self.terms, keys, strict=True)]
        return functools.reduce(lambda a, b: a + b, values)


def local_energy(psi: object, terms: Sequence[Term]) -> SumOfTerms:
    """The local energy of ``psi`` (an ansatz or a log|psi| function) from ``terms``."""
    if not terms:
        raise ValueError("the local energy needs at least one term")
    return SumOfTerms(psi_functions(psi), tuple(terms))


def molecular_terms(molecule: Molecule, op: LaplacianOperator) -> tuple[Term, ...]:
    """The all-electron molecular Hamiltonian: kinetic energy and Coulomb potential."""
    return (Kinetic(op), LocalPotential(coulomb_potential(molecule)))


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


def make_local_energy(log_abs: LogAbs, potential: Potential, op: LaplacianOperator) -> SumOfTerms:
    """``local_energy(params, r)``: kinetic energy through ``op`` plus ``potential``."""
    return local_energy(log_abs, (Kinetic(op), LocalPotential(potential)))
