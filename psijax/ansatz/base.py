"""What every wavefunction gives the rest of psijax: the ``Ansatz`` protocol.

An ansatz is a frozen dataclass whose fields fix every shape. The training step, the
Hamiltonian, the samplers and evaluation use ``init``/``apply``/``log_abs``; Hartree-Fock
pretraining uses ``orbitals`` with ``n_determinants`` and ``full_det``. A new ansatz is
one file in ``psijax/ansatz/`` and one entry in ``psijax.registry.ANSATZES``; nothing in
the step, loss or loop changes. Both ansaetze here end in the shared orbital head
(``psijax.ansatz.head``).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable
from typing import Protocol, runtime_checkable

import jax
import jax.numpy as jnp
import numpy as np

from psijax import precision
from psijax.ansatz import jastrow as cusp
from psijax.ansatz import taps
from psijax.ansatz.head import OrbitalHead, determinants
from psijax.system import sizing
from psijax.types import Array, Normal, Params, Psi


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


class MolecularAnsatz:
    """What FermiNet and PsiFormer share, for frozen dataclasses with the fields ``n_up``,
    ``n_down``, ``nuclei``, ``n_determinants``, ``full_det``, ``jastrow`` and
    ``matmul_precision`` (``envelope_floor`` too, or none), an ``_init(normal, dtype)`` and
    ``_features(params, r, tapped)``:
    electron and atom counts, the orbital head, the orbitals and psi from the features
    (times the cusp factor, ``psijax.ansatz.jastrow``), ``log_abs``, ``log_abs_tapped``
    (``psijax.ansatz.taps``) and ``init`` as one program."""

    @property
    def n_electrons(self) -> int:
        return self.n_up + self.n_down

    @property
    def n_atoms(self) -> int:
        return len(self.nuclei)

    @property
    def head(self) -> OrbitalHead:
        return OrbitalHead(
            self.n_up,
            self.n_down,
            self.n_atoms,
            self.n_determinants,
            self.full_det,
            getattr(self, "envelope_floor", 0.0),  # an ansatz without the field: no floor
        )

    def log_abs(self, params: Params, r: Array) -> Array:
        return self.apply(params, r).log_abs

    @precision.of_ansatz
    def orbitals(self, params: Params, r: Array) -> list[Array]:
        """Orbital matrices, each [n_determinants, n, n]: one (full_det) or up and down."""
        return self._orbitals(params, r)

    @precision.of_ansatz
    def apply(self, params: Params, r: Array) -> Psi:
        """psi(r) as sign and log|psi| for one walker r: [n_electrons, 3] in bohr."""
        return self._apply(params, r)

    @precision.of_ansatz
    def apply_groups(self, params: Params, r: Array, groups: int) -> Psi:
        """``groups`` wavefunctions ``Psi`` of ``[groups]`` from one evaluation of the
        network: its determinants split into that many equal consecutive groups, each group
        summed as ``apply`` sums all (times the one cusp factor). What several states with
        one shared network are (``psijax.ansatz.states.SharedStates``)."""
        psi = determinants(self._orbitals(params, r), groups)
        return Psi(psi.sign, psi.log_abs + self._jastrow(params, r)) if self.jastrow else psi

    @precision.of_ansatz
    def log_abs_tapped(self, params: Params, r: Array, tapped: taps.Taps) -> Array:
        """log|psi(r)| with the electron-wise dense layers tapped (``psijax.ansatz.taps``:
        SPRING's jacobian in factors)."""
        return self._apply(params, r, tapped).log_abs

    def _orbitals(self, params: Params, r: Array, tapped: taps.Taps | None = None) -> list[Array]:
        h, r_ae = self._features(params, r, tapped)
        return self.head.orbitals(params["orbitals"], h, r_ae, tapped)

    def _apply(self, params: Params, r: Array, tapped: taps.Taps | None = None) -> Psi:
        psi = determinants(self._orbitals(params, r, tapped))
        return Psi(psi.sign, psi.log_abs + self._jastrow(params, r)) if self.jastrow else psi

    def _jastrow(self, params: Params, r: Array) -> Array:
        """The exponent J of the cusp factor exp(J) (``psijax.ansatz.jastrow``)."""
        return cusp.exponent(params["jastrow"], r, self.n_up)

    @precision.of_ansatz
    def head_inputs(self, params: Params, r: Array) -> tuple[Array, Array]:
        """What the orbital head takes for one walker: the final electron features
        ``[n, width]`` and the electron-nucleus distances ``[n, atoms]`` (pretraining fits
        the head's projection to them, ``OrbitalHead.fit``)."""
        return self._features(params, r)

    def at(self, nuclei: Array):
        """The same ansatz with the nuclei at ``nuclei`` ``[atoms, 3]`` (bohr), which may
        be traced: ``jax.grad`` of ``net.at(R).log_abs(params, r)`` with respect to ``R`` is
        what the forces' Pulay term needs. Not hashable with a traced array: use it inside
        the function being transformed, not as a static argument."""
        return dataclasses.replace(self, nuclei=nuclei)

    def init(self, key: Array, dtype=jnp.float32) -> Params:
        """Random parameters; shapes depend only on the static fields.

        One compiled program, compiled without backend optimisation, and one draw of
        random numbers (``drawn``): run eagerly, its ~40 random ops were each compiled on
        their own (3.5 s at launch); jitted at XLA's default optimisation with a draw per
        array the program took 2.4 s to compile, at level 0 0.6-1.2 s, with one draw 0.2-0.4 s.
        """
        if isinstance(key, jax.core.Tracer):  # inside jit/eval_shape: nested jits take no
            return drawn(self._init, key, jnp.dtype(dtype))  # compiler options
        return _jitted_init(self, key, jnp.dtype(dtype))


def drawn(build: Callable[[Normal, jnp.dtype], Params], key: Array, dtype) -> Params:
    """``build(normal, dtype)`` with every ``normal(shape)`` cut from one draw of standard
    normal numbers of ``dtype``: one random-number computation for the whole tree (each
    draw expands into its own ~150 operations, most of the program's compile)."""
    shapes: list[tuple[int, ...]] = []

    def record(shape: tuple[int, ...]) -> Array:
        shapes.append(tuple(shape))
        return jnp.zeros(shape, dtype)

    jax.eval_shape(lambda: build(record, dtype))  # the shapes asked for, in order
    sizes = [math.prod(shape) for shape in shapes]
    flat = jax.random.normal(key, (sum(sizes),), dtype)
    parts = iter(jnp.split(flat, np.cumsum(sizes)[:-1].tolist()))
    return build(lambda shape: next(parts).reshape(shape), dtype)


@functools.partial(
    jax.jit, static_argnums=(0, 2), compiler_options={"xla_backend_optimization_level": 0}
)
def _jitted_init(net: MolecularAnsatz, key: Array, dtype) -> Params:
    return drawn(net._init, key, dtype)


def nuclei_of(molecule) -> tuple[tuple[float, float, float], ...]:
    """The nuclear positions of a ``psijax.Molecule`` as the static field an ansatz holds."""
    return tuple(map(tuple, molecule.nuclear_positions.tolist()))


def soft_core_of(molecule, config) -> tuple[float, ...]:
    """``config.ecp_soft_core`` (unset: sized from the molecule, ``psijax.system.sizing``)
    for every atom whose core an ECP replaces, 0 for the others; empty when no atom is
    softened."""
    value = config.ecp_soft_core
    if value is None:
        value = sizing.soft_core_for(molecule)
    soft = tuple(float(value) if core else 0.0 for core in molecule.core_electrons)
    return soft if any(soft) else ()
