"""The homogeneous electron gas: N electrons in a cubic cell with a uniform neutralising
background, at the density of Wigner-Seitz radius rs (bohr): the cell's side is

    L = (4 pi N / 3)^(1/3) rs.

At the Gamma point the one-electron states are plane waves exp(i k . r) with
k = 2 pi n / L (n a vector of integers). A spin's electrons fill them by |k|; a filling
is a closed shell when it takes every k of each |k| it touches (1, 7, 19, 27, 33, 57, ...
electrons), and only then is the determinant unique and real. The determinant here takes
the real orbitals 1, cos(k . r) and sin(k . r) (one k of each pair +-k): they span the
same space as the plane waves, so psi is the plane-wave determinant times a constant,
real, with the cell's periodicity in every electron.

At a twist t (fractions of the reciprocal vectors, twisted boundary conditions: psi
gains exp(i 2 pi t_i) when an electron moves by the lattice vector a_i), k = 2 pi (n + t)
/ L and the orbitals are the complex plane waves themselves, so psi is complex. Every
plane wave has a uniform density, so any filling is a determinant of uniform density and
the energy below holds for it: where the last shell is part-filled (most counts, at most
twists) it takes that shell's first states in a fixed order, one of its degenerate
determinants, as canonical twist averaging at a fixed electron count does.

Its energy per cell with the Ewald-summed interaction (``psijax.hamiltonian.ewald``) is
the Hartree-Fock energy of the electron gas:

    E_HF = sum_k |k|^2 / 2 + N xi / 2 - (2 pi / V) sum_spin sum_{k != k'} 1 / |k - k'|^2

(the kinetic energy, each electron's interaction with its own images, xi the Madelung
constant of the cell, and exchange between different k of one spin). The Hartree term
is zero: the density is uniform and the background cancels it. Exchange's q = 0 term
(k = k') is what the Madelung term replaces. For 14 electrons, unpolarised:
rs = 1 gives 8.4914806035 Ha, the value of the cc4s project's electron-gas test
(github.com/cc4s/test-resources, ueg/rs1.0_7occ_26virt), and rs = 5 gives
-0.8125487031 Ha, within 2.4 error bars of QMCPACK's variational Monte Carlo estimate
for the same determinant, -0.812484(27) Ha (tests/heg/heg_14_gamma).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from typing import Any

import jax.numpy as jnp
import numpy as np

from psijax.errors import InputError
from psijax.system.lattice import Lattice
from psijax.types import Array, Params, Psi

Twist = tuple[float, float, float]  # in fractions of the reciprocal vectors
GAMMA: Twist = (0.0, 0.0, 0.0)


def shells(max_squared: int, twist: Twist = GAMMA) -> tuple[np.ndarray, np.ndarray]:
    """Integer vectors n with |n + t|^2 <= ``max_squared`` (t the twist) sorted by |n + t|^2
    (ties in a fixed order), and the closed-shell fillings: the number of vectors up to each
    |n + t|^2 taken."""
    reach = math.isqrt(max_squared) + (1 if any(twist) else 0)
    axis = np.arange(-reach, reach + 1)
    n = np.array(np.meshgrid(axis, axis, axis, indexing="ij")).reshape(3, -1).T
    squared = np.round(np.sum((n + np.asarray(twist)) ** 2, axis=1), 9)
    keep = squared <= max_squared
    n, squared = n[keep], squared[keep]
    order = np.lexsort((n[:, 2], n[:, 1], n[:, 0], squared))
    n, squared = n[order], squared[order]
    ends = np.flatnonzero(np.diff(squared)) + 1
    return n, np.append(ends, len(n))


def closed_shells(up_to: int, twist: Twist = GAMMA) -> tuple[int, ...]:
    """The closed-shell electron counts of one spin up to ``up_to``: 1, 7, 19, 27, ... at
    Gamma (more vectors than m have |n + t|^2 <= m, so every filling up to ``up_to`` is in
    ``shells(up_to)``)."""
    _, fillings = shells(max(int(up_to), 1), twist)
    return tuple(int(f) for f in fillings if f <= up_to)


def parse_twist(text: Any) -> Twist:
    """A twist as given (``"0.25 0 0"``, or three numbers), in fractions of the reciprocal
    vectors, each brought into (-1/2, 1/2] (t and t + 1 are one twist); None is Gamma."""
    if text is None:
        return GAMMA
    parts = text.replace(",", " ").split() if isinstance(text, str) else list(text)
    try:
        values = [float(v) for v in parts]
    except (TypeError, ValueError):
        values = []
    if len(values) != 3 or not all(math.isfinite(v) for v in values):
        raise InputError(
            f"twist {text!r} is not three numbers; give the twist in fractions of the "
            "reciprocal vectors, e.g. --twist '0.25 0 0' (0 0 0: the Gamma point)"
        )
    wrapped = [v - math.ceil(v - 0.5) for v in values]
    return tuple(0.0 if abs(v) < 1e-12 else round(v, 12) for v in wrapped)  # type: ignore[return-value]


# ``--system`` names of the electron gas (any case)
NAMES = ("heg", "electron-gas")


def is_named(system: Any) -> bool:
    """Whether a config's ``system`` names the electron gas."""
    return isinstance(system, str) and system.strip().lower() in NAMES


def from_config(config: Any) -> ElectronGas:
    """The electron gas of a run's config: ``electrons`` at ``rs``, polarised by ``spin``
    (None: the lowest). Everything that means nothing without nuclei, or that the gas does
    not have, is refused with one line naming it."""
    if config.electrons is None or config.rs is None:
        raise InputError(
            "the electron gas needs its electrons and density; give e.g. --electrons 14 --rs 5"
        )
    meaningless = {
        "charge": config.charge not in (None, 0), "ecp": config.ecp is not None,
        "basis": config.basis is not None, "init_from": config.init_from is not None,
    }  # fmt: skip
    for name, given in meaningless.items():
        if given:
            raise InputError(
                f"--{name.replace('_', '-')} has no meaning for the electron gas (no nuclei, "
                "no basis: the network starts as the plane-wave determinant); leave it out"
            )
    if config.states != 1:
        raise InputError(
            f"states={config.states}: the electron gas is solved for its ground state only; "
            "give --states 1"
        )
    n = config.electrons
    spin = n % 2 if config.spin is None else config.spin
    if abs(spin) > n or (n + spin) % 2:
        raise InputError(
            f"spin {spin} is impossible with {n} electrons; give -{n} <= spin <= {n} with "
            f"n_up - n_down of the parity of {n}, e.g. --spin {n % 2}"
        )
    n_up, n_down = (n + spin) // 2, (n - spin) // 2
    twist = parse_twist(getattr(config, "twist", None))
    if twist != GAMMA and getattr(config, "jacobian_blocks", 1) > 1:
        raise InputError(
            f"jacobian_blocks={config.jacobian_blocks}: a twist's complex psi forms its "
            "jacobian whole (two rows a walker); leave --jacobian-blocks out"
        )
    shells = closed_shells(max(n_up, n_down, 60))
    if twist == GAMMA and any(count and count not in shells for count in (n_up, n_down)):
        raise InputError(
            f"{n} electrons at spin {spin} are {n_up} up and {n_down} down, not closed shells "
            f"of plane waves at the Gamma point; give each spin a closed shell "
            f"({', '.join(map(str, shells))}), e.g. --electrons "
            f"{2 * min(shells, key=lambda c: abs(2 * c - n))} --spin 0, or a --twist"
        )
    return ElectronGas(n_up, n_down, config.rs, twist)


def _shown(twist: Twist) -> str:
    return "(" + ", ".join(f"{t:g}" for t in twist) + ")"


@dataclasses.dataclass(frozen=True)
class ElectronGas:
    """``n_up`` + ``n_down`` electrons at Wigner-Seitz radius ``rs`` (bohr) in a cubic cell,
    each spin a closed shell of plane waves (or empty) at ``twist`` (fractions of the
    reciprocal vectors; Gamma by default, module docstring). No nuclei: the background
    alone neutralises the cell.

    As a run's system it answers what a run asks of a ``Molecule``: no atoms (empty
    ``symbols``, ``charges``, ``coords``, ``ecp``), charge 0, no exact energy, and a
    ``fingerprint`` of its electrons and density."""

    n_up: int
    n_down: int
    rs: float
    twist: Twist = GAMMA

    # what a run asks of a system, for a system without nuclei
    symbols: tuple[str, ...] = dataclasses.field(default=(), init=False, repr=False)
    charges: tuple[float, ...] = dataclasses.field(default=(), init=False, repr=False)
    coords: tuple = dataclasses.field(default=(), init=False, repr=False)
    ecp: tuple = dataclasses.field(default=(), init=False, repr=False)
    charge: int = dataclasses.field(default=0, init=False, repr=False)
    exact_energy: None = dataclasses.field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        for name in ("n_up", "n_down"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 0:
                raise InputError(f"{name} must be a whole number >= 0, got {value!r}")
            object.__setattr__(self, name, int(value))
        object.__setattr__(self, "twist", parse_twist(self.twist))
        for name in ("n_up", "n_down"):
            value = getattr(self, name)
            if self.is_real and value and value not in closed_shells(value):
                shown = ", ".join(map(str, closed_shells(max(2 * value, 60))))
                raise InputError(
                    f"{name}={value} leaves a shell of plane waves part-filled; use a closed "
                    f"shell: 0, {shown}, ..."
                )
        if self.n_up + self.n_down < 1:
            raise InputError("the electron gas has no electrons; give n_up + n_down >= 1")
        rs = self.rs
        if isinstance(rs, bool) or not isinstance(rs, int | float) or not math.isfinite(rs):
            raise InputError(f"rs={rs!r} is not a number; give the Wigner-Seitz radius in bohr")
        if rs <= 0:
            raise InputError(f"rs={rs!r} is not positive; give the Wigner-Seitz radius in bohr")
        object.__setattr__(self, "rs", float(rs))

    @classmethod
    def unpolarised(cls, n_electrons: int, rs: float) -> ElectronGas:
        """Half the electrons of each spin (``n_electrons`` even)."""
        if isinstance(n_electrons, int) and n_electrons % 2:
            raise InputError(f"{n_electrons} electrons cannot be unpolarised; give an even number")
        return cls(n_electrons // 2, n_electrons // 2, rs)

    @property
    def n_electrons(self) -> int:
        return self.n_up + self.n_down

    @property
    def spin(self) -> int:
        """n_up - n_down."""
        return self.n_up - self.n_down

    @property
    def length(self) -> float:
        """The cell's side L = (4 pi N / 3)^(1/3) rs (bohr)."""
        return (4.0 * math.pi * self.n_electrons / 3.0) ** (1.0 / 3.0) * self.rs

    @property
    def lattice(self) -> Lattice:
        return Lattice.cubic(self.length)

    @property
    def nuclear_charges(self) -> np.ndarray:
        """No nuclei: an empty float array [0]."""
        return np.zeros(0)

    @property
    def nuclear_positions(self) -> np.ndarray:
        """No nuclei: an empty float array [0, 3]."""
        return np.zeros((0, 3))

    @property
    def is_real(self) -> bool:
        """Whether psi is real: at the Gamma point. At any other twist the orbitals are
        exp(i k . r) and psi is complex."""
        return self.twist == GAMMA

    def wavevectors(self, n: int) -> np.ndarray:
        """The ``n`` occupied k = 2 pi (n + t) / L of one spin (1/bohr), t the twist, float
        array [n, 3] by |k|. At a twist a part-filled shell takes its first states in a
        fixed order (module docstring)."""
        vectors, fillings = shells(max(n, 1), self.twist)
        if self.is_real and n not in (0, *fillings):
            shown = ", ".join(map(str, closed_shells(n, self.twist)))
            raise InputError(f"{n} plane waves is not a closed shell; use one of {shown}")
        shifted = vectors[:n].astype(np.float64) + np.asarray(self.twist)
        return 2.0 * math.pi / self.length * shifted

    def kinetic_energy(self) -> float:
        """sum_k |k|^2 / 2 over the occupied states of both spins (Hartree)."""
        return sum(0.5 * float(np.sum(self.wavevectors(n) ** 2)) for n in self._spins())

    def madelung_energy(self) -> float:
        """N xi / 2: every electron's interaction with its own images and background (Ha)."""
        return 0.5 * self.n_electrons * self.lattice.madelung()

    def exchange_energy(self) -> float:
        """-(2 pi / V) sum_spin sum_{k != k'} 1 / |k - k'|^2 (Hartree)."""
        total = 0.0
        for n in self._spins():
            k = self.wavevectors(n)
            q2 = np.sum((k[:, None, :] - k[None, :, :]) ** 2, axis=-1)
            total += float(np.sum(1.0 / q2[~np.eye(n, dtype=bool)]))
        return -2.0 * math.pi / self.length**3 * total

    def hartree_fock_energy(self) -> float:
        """The energy per cell (Hartree) of the plane-wave determinant: kinetic, Madelung
        and exchange energies (the module docstring)."""
        return self.kinetic_energy() + self.madelung_energy() + self.exchange_energy()

    @property
    def name(self) -> str:
        twist = "" if self.is_real else f", twist {_shown(self.twist)}"
        return f"electron gas, {self.n_up} + {self.n_down} electrons at rs = {self.rs:g}{twist}"

    @property
    def n_atoms(self) -> int:
        return 0

    @property
    def core_electrons(self) -> tuple[int, ...]:
        return ()

    @property
    def nuclear_repulsion(self) -> float:
        return 0.0

    def fingerprint(self) -> str:
        """Short stable hex id of the electrons per spin, rs (to 1e-9 bohr) and the twist
        (Gamma's id as before twists)."""
        twist = [] if self.is_real else [list(self.twist)]
        payload = json.dumps(["electron gas", self.n_up, self.n_down, round(self.rs, 9), *twist])
        return hashlib.sha256(payload.encode()).hexdigest()[:16]

    def describe(self) -> list[str]:
        """The dry run's lines: the cell, the density, the Madelung constant and the
        Hartree-Fock energy of the plane-wave determinant."""
        n, lattice = self.n_electrons, self.lattice
        e_hf = self.hartree_fock_energy()
        return [
            f"system         the homogeneous electron gas: {n} electrons ({self.n_up} up, "
            f"{self.n_down} down) in a neutralising background, "
            + ("Gamma point" if self.is_real else f"twist {_shown(self.twist)} (complex psi)"),
            f"cell           cube of side {self.length:.6f} bohr, volume {lattice.volume:.6f} "
            f"bohr^3; rs = {self.rs:g} bohr",
            f"madelung       xi = {lattice.madelung():.10f} Ha (the cell's Madelung constant)",
            f"hartree-fock   plane-wave determinant E = {e_hf:.7f} Ha per cell, "
            f"{e_hf / n:.7f} Ha per electron (kinetic {self.kinetic_energy():.7f}, Madelung "
            f"{self.madelung_energy():.7f}, exchange {self.exchange_energy():.7f})",
        ]

    def determinant(self) -> PlaneWaveDeterminant:
        """The closed-shell Slater determinant of plane-wave orbitals (real at Gamma)."""
        return PlaneWaveDeterminant(self)

    def _spins(self) -> tuple[int, ...]:
        return tuple(n for n in (self.n_up, self.n_down) if n)


@dataclasses.dataclass(frozen=True)
class PlaneWaveDeterminant:
    """psi(r) = det[phi_j(r_i)] over the up electrons (the first ``n_up`` of a walker) times
    the same over the down ones; at Gamma phi_j(r) = cos(k_j . r + phase_j) with phase 0
    (cos) or -pi/2 (sin), at any other twist phi_j(r) = exp(i k_j . r). ``apply(params, r)``
    and ``log_abs(params, r)`` take one walker ``r: [electron, 3]`` (bohr) and ignore
    ``params``, the signature of an ansatz."""

    gas: ElectronGas

    def orbitals(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        """(k [n, 3] in 1/bohr, phase [n]) of one spin's ``n`` orbitals: real ones at Gamma,
        the plane waves themselves (phase 0) at any other twist."""
        k = self.gas.wavevectors(n)
        if not self.gas.is_real:
            return k, np.zeros(n)
        integers = np.rint(k * self.gas.length / (2.0 * math.pi)).astype(int)
        first = np.argmax(integers != 0, axis=1)
        positive = integers[np.arange(n), first] > 0
        half = k[positive]
        vectors = np.concatenate([k[:1], half, half]) if n else k
        phases = np.concatenate([[0.0], np.zeros(len(half)), np.full(len(half), -math.pi / 2)])
        return vectors, phases[:n]

    @property
    def is_complex(self) -> bool:
        return not self.gas.is_real

    def apply(self, params: Params, r: Array) -> Psi:
        # wrapping into the cell moves a complex psi's phase: only a real one is wrapped
        r = self.gas.lattice.wrap(r) if self.gas.is_real else r
        sign, log_abs = jnp.ones((), r.dtype), jnp.zeros((), r.dtype)
        n_up = self.gas.n_up
        for n, block in ((n_up, r[:n_up]), (self.gas.n_down, r[n_up:])):
            if not n:
                continue
            k, phase = self.orbitals(n)
            angle = block @ jnp.asarray(k.T, r.dtype) + jnp.asarray(phase, r.dtype)
            matrix = jnp.cos(angle) if self.gas.is_real else jnp.exp(1j * angle)
            s, value = jnp.linalg.slogdet(matrix)
            sign, log_abs = sign * s, log_abs + value
        return Psi(sign, log_abs)

    def log_abs(self, params: Params, r: Array) -> Array:
        return self.apply(params, r).log_abs

    def log_psi(self, params: Params, r: Array) -> Array:
        """log psi = log|psi| + i arg psi (complex; at Gamma the log of a real psi)."""
        return log_of(self.apply(params, r))


def log_of(psi: Psi) -> Array:
    """log psi of ``Psi(sign, log|psi|)`` with a complex sign: log|psi| + log(sign), whose
    imaginary part is the phase (its derivatives are continuous across the branch cut)."""
    return psi.log_abs + jnp.log(psi.sign)
