"""The local energy as a sum of terms, in Hartree, for one walker (positions in bohr).

    E_L(r) = sum_t E_t(r),   e.g.
    kinetic   -1/2 (lap log|psi| + |grad log|psi||^2)            (``Kinetic``)
    Coulomb   electron-nucleus + electron-electron + nucleus-nucleus   (``Coulomb``)

A ``Hamiltonian`` is its terms and the Laplacian operator its kinetic term uses. A term
sees one ``Walker`` (the positions, the parameters, psi and log|psi|'s derivatives, each
computed at most once however many terms and observables ask for it) and a random key,
and returns its components by name (``{"kinetic": ...}``; the Coulomb term has three). A
term that draws random numbers (a pseudopotential's quadrature) says so (``needs_key``)
and gets its own key; the steps then hand every walker its own.

Training's energy, evaluation's energy and its component columns, the forces' local
energy and ``psijax.load(...).local_energy`` all come from ``Hamiltonian.parts``: a term
added to the Hamiltonian (``psijax.registry.HAMILTONIAN``) is in every one of them.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import NamedTuple, Protocol

import jax
import jax.numpy as jnp

from psijax.laplacian import Derivatives, LaplacianOperator
from psijax.types import IMAGINARY, Array, LogAbs, Params, Psi, WavefunctionApply


class PsiFunctions(NamedTuple):
    """What the Hamiltonian sees of psi: ``log_abs(params, r)`` and ``apply(params, r) -> Psi``;
    for a complex psi also ``log_psi(params, r)``, log|psi| + i arg psi."""

    log_abs: LogAbs
    apply: WavefunctionApply
    log_psi: Callable | None = None  # None: psi is real


def psi_functions(psi: object) -> PsiFunctions:
    """An ansatz (anything with ``log_abs`` and ``apply``; ``log_psi`` too where its
    ``is_complex``) or a bare log|psi| function."""
    if isinstance(psi, PsiFunctions):
        return psi
    if hasattr(psi, "log_abs") and hasattr(psi, "apply"):
        log_psi = psi.log_psi if getattr(psi, "is_complex", False) else None
        return PsiFunctions(psi.log_abs, psi.apply, log_psi)
    log_abs = psi
    return PsiFunctions(log_abs, lambda params, r: Psi(jnp.ones((), r.dtype), log_abs(params, r)))


class Walker:
    """One walker as the terms and observables see it.

    ``psi`` and ``derivatives`` (log|psi|, its gradient ``[electron, 3]`` and Laplacian, from
    the Hamiltonian's Laplacian operator) are computed when first asked for, once per
    trace; nothing is computed that no term or observable reads.
    """

    def __init__(
        self, wf: PsiFunctions, params: Params, r: Array, laplacian: LaplacianOperator,
        key: Array | None = None,
    ):  # fmt: skip
        self.wf, self.params, self.r, self.key = wf, params, r, key
        self._laplacian = laplacian

    def moved(self, log_abs: LogAbs, apply: WavefunctionApply, r: Array) -> Walker:
        """A walker of another (real) psi, ``log_abs`` and ``apply``, at ``r``, with this
        one's parameters, Laplacian operator and key (the forces' moved nuclei)."""
        return Walker(PsiFunctions(log_abs, apply), self.params, r, self._laplacian, self.key)

    @functools.cached_property
    def psi(self) -> Psi:
        return self.wf.apply(self.params, self.r)

    @functools.cached_property
    def derivatives(self) -> Derivatives:
        log = self.wf.log_abs if self.wf.log_psi is None else self.wf.log_psi
        return self._laplacian(functools.partial(log, self.params))(self.r)

    @property
    def grad(self) -> Array:
        """grad log psi ``[electron, 3]`` (1/bohr): of log|psi|, complex for a complex psi."""
        return self.derivatives[1]

    @property
    def lap(self) -> Array:
        """The Laplacian of log psi (1/bohr^2), complex for a complex psi."""
        return self.derivatives[2]


class Term(Protocol):
    """One part of the local energy of one walker: its components in Hartree, by name."""

    components: tuple[str, ...]  # the names of the values it returns, in order
    needs_key: bool

    def __call__(self, walker: Walker, key: Array | None) -> dict[str, Array]: ...


@dataclasses.dataclass(frozen=True)
class Hamiltonian:
    """The Hamiltonian as a sum of ``terms``; ``laplacian`` gives the walkers' derivatives."""

    terms: tuple[Term, ...]
    laplacian: LaplacianOperator

    def __post_init__(self) -> None:
        if not self.terms:
            raise ValueError("the Hamiltonian needs at least one term")
        names = [c for t in self.terms for c in t.components]
        if len(set(names)) != len(names) or "energy" in names:
            raise ValueError(f"the terms' components {names} must be distinct and not 'energy'")

    @property
    def needs_key(self) -> bool:
        return any(t.needs_key for t in self.terms)

    @property
    def columns(self) -> tuple[str, ...]:
        """``energy`` and every term's components, in order."""
        return ("energy", *(c for t in self.terms for c in t.components))

    def walker(self, psi: object, params: Params, r: Array, key: Array | None = None) -> Walker:
        return Walker(psi_functions(psi), params, r, self.laplacian, key)

    def parts(self, walker: Walker) -> dict[str, Array]:
        """``{"energy": E_L, component: value, ...}`` of one walker, in Hartree."""
        keys = [None] * len(self.terms)
        if self.needs_key:
            keys = list(jax.random.split(walker.key, len(self.terms)))
        values: dict[str, Array] = {}
        totals = []
        for term, key in zip(self.terms, keys, strict=True):
            got = term(walker, key)
            if list(got) != list(term.components):
                name = type(term).__name__
                raise ValueError(f"{name} gave {list(got)}, declared {list(term.components)}")
            values.update(got)
            totals.append(functools.reduce(lambda a, b: a + b, got.values()))
        return {"energy": functools.reduce(lambda a, b: a + b, totals), **values}

    def local_energy(self, psi: object) -> LocalEnergy:
        """E_L of the wavefunction ``psi`` (an ansatz or a log|psi| function): its real part,
        with the imaginary part beside it for a complex psi (``ComplexLocalEnergy``).
        Several states' total wavefunction has a local energy matrix instead
        (``psijax.hamiltonian.states.StatesEnergy``, built by ``psijax.eigenstates``)."""
        functions = psi_functions(psi)
        if functions.log_psi is not None:
            return ComplexLocalEnergy(self, functions)
        return LocalEnergy(self, functions)


@dataclasses.dataclass(frozen=True)
class LocalEnergy:
    """``local_energy(params, r, key=None)`` in Hartree for one walker; ``parts`` gives the
    components too."""

    hamiltonian: Hamiltonian
    psi: PsiFunctions

    @property
    def needs_key(self) -> bool:
        return self.hamiltonian.needs_key

    def __call__(self, params: Params, r: Array, key: Array | None = None) -> Array:
        return self.parts(params, r, key)["energy"]

    def parts(self, params: Params, r: Array, key: Array | None = None) -> dict[str, Array]:
        return self.hamiltonian.parts(self.hamiltonian.walker(self.psi, params, r, key))


@dataclasses.dataclass(frozen=True)
class ComplexLocalEnergy(LocalEnergy):
    """E_L of a complex psi: ``__call__`` and ``parts`` give its real part, the energy;
    ``with_aux`` gives the imaginary part beside it, Im E_L = Im(kinetic) (every potential
    is real), which averages to zero over |psi|^2 but weights the gradient."""

    def with_aux(self, params: Params, r: Array, key: Array | None = None):
        walker = self.hamiltonian.walker(self.psi, params, r, key)
        parts = self.hamiltonian.parts(walker)
        return parts["energy"], {IMAGINARY: imaginary_kinetic(walker)}


def imaginary_kinetic(walker: Walker) -> Array:
    """Im of -1/2 (lap log psi + (grad log psi)^2) for a complex psi: -1/2 (lap arg psi +
    2 grad log|psi| . grad arg psi)."""
    return jnp.imag(-0.5 * (walker.lap + jnp.sum(walker.grad**2, axis=(-2, -1))))
