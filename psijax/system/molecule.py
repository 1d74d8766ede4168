"""Molecules: nuclei, charge and spin in Hartree atomic units (bohr), validated once.

A `Molecule` is valid by construction: every constructor and `dataclasses.replace` runs the
same checks, and bad input raises `InputError` with one line naming the problem and the fix.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import warnings
from typing import Any, ClassVar

import numpy as np

from psijax.errors import InputError
from psijax.system import ecp as tables
from psijax.system.elements import Z_OF, symbol_of
from psijax.system.presets import ECP_REFERENCES, REFERENCES

BOHR_PER_ANGSTROM = 1.0 / 0.529177210903
MIN_DISTANCE_BOHR = 1e-3

Coord = tuple[float, float, float]


@dataclasses.dataclass(frozen=True)
class Molecule:
    """Nuclei (symbols, charges Z, positions in bohr), net charge and spin = n_up - n_down.

    `ecp` names each atom's effective core potential (a pyscf table such as ``ccecp``) or
    ``None`` (all-electron); empty when no atom has one. An ECP atom's core electrons are
    not in the molecule, and its nucleus carries ``Z - n_core`` (``nuclear_charges``).
    `name` is a label only: it takes no part in equality.
    """

    symbols: tuple[str, ...]
    charges: tuple[float, ...]
    coords: tuple[Coord, ...]
    charge: int = 0
    spin: int = 0
    name: str | None = dataclasses.field(default=None, compare=False)
    ecp: tuple[str | None, ...] = ()
    lattice: ClassVar[None] = None  # no periodic cell (``psijax.system.ElectronGas`` has one)

    def __post_init__(self) -> None:
        symbols = tuple(
            symbol_of(s, f"in atom {i} of the molecule")
            for i, s in enumerate(self.symbols, start=1)
        )
        coords = tuple(_coord(c, i) for i, c in enumerate(self.coords, start=1))
        charges = tuple(number_of(z) for z in self.charges)
        object.__setattr__(self, "symbols", symbols)
        object.__setattr__(self, "coords", coords)
        object.__setattr__(self, "charges", charges)
        if not symbols:
            raise InputError("the molecule has no atoms; give at least one, e.g. 'H 0 0 0'")
        if len(charges) != len(symbols) or len(coords) != len(symbols):
            raise InputError(
                f"the molecule has {len(symbols)} symbols, {len(charges)} charges and "
                f"{len(coords)} positions; give one charge and one position per atom"
            )
        for i, z in enumerate(charges, start=1):
            if not (math.isfinite(z) and z >= 1 and z == round(z)):
                raise InputError(
                    f"nuclear charge {z} of atom {i} is not a positive whole number; "
                    "use the atomic number Z of its element"
                )
        self._set_ecp()
        for name in ("charge", "spin"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | np.integer):
                raise InputError(f"{name} must be a whole number, got {value!r}; e.g. {name}=0")
            object.__setattr__(self, name, int(value))
        self._check_electrons()
        self._check_distances()

    def _check_electrons(self) -> None:
        n, spin, protons = self.n_electrons, self.spin, round(sum(self.charges))
        if n < 1:
            raise InputError(
                f"charge {self.charge:+d} leaves {n} electrons on {self._label()} "
                f"({protons} protons); use a charge of at most {protons - 1}"
            )
        if abs(spin) > n:
            raise InputError(
                f"spin {spin} needs more than the {n} electrons of {self._label()} "
                f"(n_up and n_down cannot be negative); use -{n} <= spin <= {n}"
            )
        if (n + spin) % 2:
            parity = "odd" if n % 2 else "even"
            raise InputError(
                f"spin {spin} is impossible with {n} electrons (n_up - n_down must be "
                f"{parity}); use e.g. spin={n % 2}"
            )

    def _set_ecp(self) -> None:
        names = tuple(None if e is None else str(e).strip().lower() for e in self.ecp)
        if not any(names):
            object.__setattr__(self, "ecp", ())
            return
        if len(names) != len(self.symbols):
            raise InputError(
                f"ecp names {len(names)} atoms, the molecule has {len(self.symbols)}; give one "
                "name (or None) per atom"
            )
        object.__setattr__(self, "ecp", names)
        per_element: dict[str, str | None] = {}
        for symbol, name in zip(self.symbols, names, strict=True):
            if per_element.setdefault(symbol, name) != name:
                raise InputError(
                    f"the {symbol} atoms carry different ECPs ({per_element[symbol]} and {name}); "
                    "give every atom of an element the same ECP"
                )
        for i, (symbol, name) in enumerate(zip(self.symbols, names, strict=True), start=1):
            if name is not None and tables.load(name, symbol) is None:
                raise InputError(
                    f"ECP table {name!r} has no potential for {symbol} (atom {i}); choose "
                    f"another table for {symbol} or leave it all-electron"
                )

    @property
    def core_electrons(self) -> tuple[int, ...]:
        """Electrons each atom's ECP removes (0 for all-electron atoms)."""
        if not self.ecp:
            return (0,) * len(self.symbols)
        return tuple(
            0 if name is None else tables.load(name, symbol).n_core  # type: ignore[union-attr]
            for symbol, name in zip(self.symbols, self.ecp, strict=True)
        )

    def _check_distances(self) -> None:
        dist = self._distances()
        close = np.argwhere(np.triu(dist < MIN_DISTANCE_BOHR, k=1))
        if close.size:
            i, j = (int(k) for k in close[0])
            raise InputError(
                f"atoms {i + 1} ({self.symbols[i]}) and {j + 1} ({self.symbols[j]}) are "
                f"{dist[i, j]:.2g} bohr apart; nuclei must be at least {MIN_DISTANCE_BOHR} bohr "
                "apart, move or remove one"
            )

    def _distances(self) -> np.ndarray:
        pos = self.nuclear_positions
        return np.linalg.norm(pos[:, None, :] - pos[None, :, :], axis=-1)

    def _label(self) -> str:
        return self.name or "".join(self.symbols)

    @property
    def n_atoms(self) -> int:
        return len(self.symbols)

    @property
    def n_electrons(self) -> int:
        """Electrons treated explicitly (valence only on ECP atoms)."""
        return round(sum(self.charges)) - sum(self.core_electrons) - self.charge

    @property
    def n_up(self) -> int:
        return (self.n_electrons + self.spin) // 2

    @property
    def n_down(self) -> int:
        return (self.n_electrons - self.spin) // 2

    @property
    def nuclear_positions(self) -> np.ndarray:
        """Float array [atom, 3] in bohr."""
        return np.asarray(self.coords, dtype=np.float64).reshape(-1, 3)

    @property
    def nuclear_charges(self) -> np.ndarray:
        """Float array [atom] of the charges the electrons see: Z, or Z - n_core with an ECP."""
        return np.asarray(self.charges, dtype=np.float64) - np.asarray(self.core_electrons)

    @property
    def nuclear_repulsion(self) -> float:
        """Sum over nucleus pairs of Z_i Z_j / r_ij, in Hartree."""
        z, i, j = self.nuclear_charges, *np.triu_indices(self.n_atoms, k=1)
        return float(np.sum(z[i] * z[j] / self._distances()[i, j]))

    @property
    def exact_energy(self) -> float | None:
        """Reference energy (Hartree) if this is a preset, up to a rigid motion, or a single
        neutral atom with an ECP that has one in its ground state (``ECP_REFERENCES``); else
        None."""
        if any(z != Z_OF[s.lower()] for s, z in zip(self.symbols, self.charges, strict=True)):
            return None
        if self.ecp:
            key = (self.symbols[0], self.ecp[0]) if self.n_atoms == 1 else None
            spin, energy = ECP_REFERENCES.get(key, (None, None))
            return energy if (self.charge, self.spin) == (0, spin) else None
        bonds = np.sort(self._distances()[np.triu_indices(self.n_atoms, k=1)])
        for symbols, bond, charge, spin, energy in REFERENCES.values():
            want = [] if bond is None else [bond]
            if (
                sorted(symbols) == sorted(self.symbols)
                and (charge, spin) == (self.charge, self.spin)
                and len(bonds) == len(want)
                and np.allclose(bonds, want, rtol=0.0, atol=1e-6)
            ):
                return energy
        return None

    def atom_string(self) -> str:
        """pyscf-style atoms in bohr, e.g. 'Li 0.0 0.0 0.0; H 0.0 0.0 3.015' (exact round trip)."""
        return "; ".join(
            f"{s} {x!r} {y!r} {z!r}" for s, (x, y, z) in zip(self.symbols, self.coords, strict=True)
        )

    def to_pyscf(self, basis: str = "sto-6g") -> Any:
        """A built pyscf `gto.Mole` in bohr with the same charge, spin and ECPs.

        An unknown basis, or one without some element of the molecule, raises `InputError`;
        so does an all-electron basis for an ECP atom (``psijax.system.ecp.basis_for``).
        """
        from pyscf import gto
        from pyscf.lib.exceptions import BasisNotFoundError

        fix = "use a basis pyscf knows, e.g. sto-6g, cc-pvdz or def2-svp"
        if isinstance(basis, str) and not basis.strip():
            raise InputError(f"basis {basis!r} is not a basis name; {fix}")
        atoms = [(s, c) for s, c in zip(self.symbols, self.coords, strict=True)]
        ecp: dict[str, str] = {}
        given = basis
        if self.ecp and isinstance(basis, str) and basis.strip():
            ecp = {s: e for s, e in zip(self.symbols, self.ecp, strict=True) if e is not None}
            basis = {
                s: tables.basis_for(s, ecp[s], given) if s in ecp else given for s in self.symbols
            }
        try:
            with warnings.catch_warnings():
                # pyscf's multi-line hint to install basis-set-exchange for unknown names
                warnings.simplefilter("ignore", UserWarning)
                return gto.M(
                    atom=atoms,
                    unit="Bohr",
                    basis=basis,
                    charge=self.charge,
                    spin=self.spin,
                    ecp=ecp,
                    verbose=0,
                )
        except BasisNotFoundError as err:
            missing = str(err).strip().splitlines()[0]
            what = (
                f"basis {given!r} does not cover every element of {self._label()} ({missing})"
                if missing.startswith("Basis set not found")
                else f"unknown basis {given!r}"
            )
            raise InputError(f"{what}; {fix}") from None

    def fingerprint(self) -> str:
        """Short stable hex id of symbols, coordinates (to 1e-6 bohr), charge and spin."""
        coords = [[round(x, 6) + 0.0 for x in c] for c in self.coords]
        fields = [list(self.symbols), coords, self.charge, self.spin]
        payload = json.dumps(fields + ([list(self.ecp)] if self.ecp else []))
        return hashlib.sha256(payload.encode()).hexdigest()[:16]


def number_of(x: Any) -> float:
    try:
        return float(x)
    except (TypeError, ValueError):
        return math.nan


def _coord(c: Any, i: int) -> Coord:
    values = tuple(number_of(x) for x in c) if isinstance(c, tuple | list | np.ndarray) else ()
    if len(values) != 3 or not all(math.isfinite(x) for x in values):
        raise InputError(f"position {c!r} of atom {i} is not 3 finite numbers; give x y z in bohr")
    return values  # type: ignore[return-value]
