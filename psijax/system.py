"""Molecules: nuclei, charge and spin in Hartree atomic units (bohr), parsed and validated once.

A `Molecule` is valid by construction: every constructor and `dataclasses.replace` runs the
same checks, and bad input raises `InputError` with one line naming the problem and the fix.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import warnings
from typing import Any

import numpy as np

from psijax.errors import InputError

BOHR_PER_ANGSTROM = 1.0 / 0.529177210903
MIN_DISTANCE_BOHR = 1e-3

_ELEMENT_TEXT = "H He Li Be B C N O F Ne Na Mg Al Si P S Cl Ar"
_ELEMENT_TEXT += " K Ca Sc Ti V Cr Mn Fe Co Ni Cu Zn Ga Ge As Se Br Kr"
ELEMENTS: tuple[str, ...] = tuple(_ELEMENT_TEXT.split())
_Z_OF = {symbol.lower(): z for z, symbol in enumerate(ELEMENTS, start=1)}

# name: (symbols, bond length in bohr or None, charge, spin, exact energy in Hartree).
# Copied from shared/reference/energies.csv so that an installed package needs no data files.
_PRESETS: dict[str, tuple[tuple[str, ...], float | None, int, int, float]] = {
    "H": (("H",), None, 0, 1, -0.5),
    "He": (("He",), None, 0, 0, -2.903724),
    "Li": (("Li",), None, 0, 1, -7.478060),
    "Be": (("Be",), None, 0, 0, -14.667356),
    "B": (("B",), None, 0, 1, -24.65391),
    "C": (("C",), None, 0, 2, -37.8450),
    "N": (("N",), None, 0, 3, -54.5892),
    "O": (("O",), None, 0, 2, -75.0673),
    "Ne": (("Ne",), None, 0, 0, -128.9376),
    "H2": (("H", "H"), 1.4, 0, 0, -1.174476),
    "LiH": (("Li", "H"), 3.015, 0, 0, -8.070548),
    "Li2": (("Li", "Li"), 5.051, 0, 0, -14.9954),
    "N2": (("N", "N"), 2.068, 0, 0, -109.5423),
}
PRESETS: tuple[str, ...] = tuple(_PRESETS)
_PRESET_OF = {name.lower(): name for name in PRESETS}

Coord = tuple[float, float, float]


@dataclasses.dataclass(frozen=True)
class Molecule:
    """Nuclei (symbols, charges Z, positions in bohr), net charge and spin = n_up - n_down.

    `name` is a label only: it takes no part in equality.
    """

    symbols: tuple[str, ...]
    charges: tuple[float, ...]
    coords: tuple[Coord, ...]
    charge: int = 0
    spin: int = 0
    name: str | None = dataclasses.field(default=None, compare=False)

    def __post_init__(self) -> None:
        symbols = tuple(
            _symbol(s, f"in atom {i} of the molecule") for i, s in enumerate(self.symbols, start=1)
        )
        coords = tuple(_coord(c, i) for i, c in enumerate(self.coords, start=1))
        charges = tuple(_number(z) for z in self.charges)
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
        return round(sum(self.charges)) - self.charge

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
        """Float array [atom] of Z."""
        return np.asarray(self.charges, dtype=np.float64)

    @property
    def nuclear_repulsion(self) -> float:
        """Sum over nucleus pairs of Z_i Z_j / r_ij, in Hartree."""
        z, i, j = self.nuclear_charges, *np.triu_indices(self.n_atoms, k=1)
        return float(np.sum(z[i] * z[j] / self._distances()[i, j]))

    @property
    def exact_energy(self) -> float | None:
        """Reference energy (Hartree) if this is a preset, up to a rigid motion, else None."""
        if any(z != _Z_OF[s.lower()] for s, z in zip(self.symbols, self.charges, strict=True)):
            return None
        bonds = np.sort(self._distances()[np.triu_indices(self.n_atoms, k=1)])
        for symbols, bond, charge, spin, energy in _PRESETS.values():
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
        """A built pyscf `gto.Mole` in bohr with the same charge and spin.

        An unknown basis, or one without some element of the molecule, raises `InputError`.
        """
        from pyscf import gto
        from pyscf.lib.exceptions import BasisNotFoundError

        fix = "use a basis pyscf knows, e.g. sto-6g, cc-pvdz or def2-svp"
        if isinstance(basis, str) and not basis.strip():
            raise InputError(f"basis {basis!r} is not a basis name; {fix}")
        atoms = [(s, c) for s, c in zip(self.symbols, self.coords, strict=True)]
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
                    verbose=0,
                )
        except BasisNotFoundError as err:
            missing = str(err).strip().splitlines()[0]
            what = (
                f"basis {basis!r} does not cover every element of {self._label()} ({missing})"
                if missing.startswith("Basis set not found")
                else f"unknown basis {basis!r}"
            )
            raise InputError(f"{what}; {fix}") from None

    def fingerprint(self) -> str:
        """Short stable hex id of symbols, coordinates (to 1e-6 bohr), charge and spin."""
        coords = [[round(x, 6) + 0.0 for x in c] for c in self.coords]
        payload = json.dumps([list(self.symbols), coords, self.charge, self.spin])
        return hashlib.sha256(payload.encode()).hexdigest()[:16]


def _number(x: Any) -> float:
    try:
        return float(x)
    except (TypeError, ValueError):
        return math.nan


def _symbol(text: Any, where: str) -> str:
    """Canonical element symbol from a symbol in any case or an atomic number."""
    key = str(text).strip().lower()
    z = int(key) if key.isdigit() else _Z_OF.get(key, 0)
    if not 1 <= z <= len(ELEMENTS):
        raise InputError(
            f"unknown element {str(text)!r} {where}; use a chemical symbol such as H, Li or Ne "
            "(psijax knows H to Kr)"
        )
    return ELEMENTS[z - 1]


def _coord(c: Any, i: int) -> Coord:
    values = tuple(_number(x) for x in c) if isinstance(c, tuple | list | np.ndarray) else ()
    if len(values) != 3 or not all(math.isfinite(x) for x in values):
        raise InputError(f"position {c!r} of atom {i} is not 3 finite numbers; give x y z in bohr")
    return values  # type: ignore[return-value]


def _scale(unit: str) -> float:
    """Bohr per unit of length."""
    key = unit.strip().lower()
    if key in ("bohr", "b"):
        return 1.0
    if key in ("angstrom", "a", "ang"):
        return BOHR_PER_ANGSTROM
    raise InputError(f"unknown unit {unit!r}; use 'bohr' or 'angstrom'")


def _parse_atom(text: str, where: str, scale: float) -> tuple[str, Coord]:
    fields = text.replace(",", " ").split()
    if len(fields) != 4:
        raise InputError(
            f"{text.strip()!r} {where} has {len(fields)} fields; write 'Symbol x y z', "
            "e.g. 'H 0 0 1.4'"
        )
    symbol = _symbol(fields[0], where)
    xyz = []
    for field in fields[1:]:
        try:
            x = float(field)
        except ValueError:
            raise InputError(
                f"coordinate {field!r} {where} is not a number; write x y z as numbers"
            ) from None
        if not math.isfinite(x):
            raise InputError(f"coordinate {field!r} {where} is not finite; give a real position")
        xyz.append(x * scale)
    return symbol, (xyz[0], xyz[1], xyz[2])


def _build(
    atoms: list[tuple[str, Coord]], charge: int, spin: int | None, name: str | None
) -> Molecule:
    if not atoms:
        raise InputError("the molecule has no atoms; give at least one, e.g. 'H 0 0 0'")
    symbols = tuple(s for s, _ in atoms)
    charges = tuple(float(_Z_OF[s.lower()]) for s in symbols)
    if spin is None:
        spin = (round(sum(charges)) - charge) % 2
    return Molecule(symbols, charges, tuple(c for _, c in atoms), charge, spin, name)


def from_atom_string(
    text: str,
    *,
    unit: str = "bohr",
    charge: int = 0,
    spin: int | None = None,
    name: str | None = None,
) -> Molecule:
    """Parse 'Li 0 0 0; H 0 0 3.015' (';' or newlines between atoms). spin=None: lowest."""
    scale = _scale(unit)
    parts = [p for p in text.replace("\n", ";").split(";") if p.strip()]
    atoms = [
        _parse_atom(p, f"in atom {i} of the molecule", scale) for i, p in enumerate(parts, start=1)
    ]
    return _build(atoms, charge, spin, name)


def from_xyz(path: str | os.PathLike[str], *, charge: int = 0, spin: int | None = None) -> Molecule:
    """Read a standard .xyz file: atom count, comment, then 'Sym x y z' lines in angstrom."""
    shown = os.fspath(path)
    if not os.path.isfile(path):
        raise InputError(f"xyz file {shown!r} does not exist; give the path of an .xyz file")
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except UnicodeDecodeError:
        raise InputError(
            f"xyz file {shown!r} is not UTF-8 text; give a plain-text .xyz file"
        ) from None
    except OSError as err:
        raise InputError(
            f"cannot read xyz file {shown!r} ({err.strerror}); check its permissions"
        ) from None
    while lines and not lines[-1].strip():
        lines.pop()
    if not lines:
        raise InputError(
            f"xyz file {shown!r} is empty; write the atom count, a comment line, then "
            "one 'Sym x y z' line per atom (angstrom)"
        )
    try:
        count = int(lines[0].strip())
    except ValueError:
        count = -1
    if count < 1:
        raise InputError(
            f"line 1 of {shown!r} should be the number of atoms (at least 1), got "
            f"{lines[0].strip()!r}; put the atom count on the first line"
        )
    body = lines[2:]
    if len(body) != count:
        raise InputError(
            f"{shown!r} declares {count} atoms but has {len(body)} atom lines; "
            "make the count on line 1 match the atom lines (one molecule per file)"
        )
    atoms = [
        _parse_atom(text, f"on line {i} of {shown!r}", BOHR_PER_ANGSTROM)
        for i, text in enumerate(body, start=3)
    ]
    stem = os.path.splitext(os.path.basename(shown))[0]
    return _build(atoms, charge, spin, stem or None)


def from_pyscf(mol: Any, *, name: str | None = None) -> Molecule:
    """Molecule of a built, all-electron pyscf `Mole` (coordinates in bohr)."""
    if not getattr(mol, "_built", True):
        raise InputError("the pyscf Mole is not built; call mol.build() before passing it")
    if mol.has_ecp():
        raise InputError("the pyscf Mole uses an ECP; psijax is all-electron, drop the ecp option")
    symbols = [
        _symbol(mol.atom_pure_symbol(i), f"in atom {i + 1} of the pyscf Mole")
        for i in range(mol.natm)
    ]
    coords = [tuple(float(x) for x in c) for c in np.asarray(mol.atom_coords(unit="Bohr"))]
    return _build(list(zip(symbols, coords, strict=True)), int(mol.charge), int(mol.spin), name)


def preset(name: str) -> Molecule:
    """One of PRESETS (case-insensitive) at the reference geometry, charge and spin."""
    key = _PRESET_OF.get(name.strip().lower())
    if key is None:
        raise InputError(f"unknown preset {name!r}; use one of {', '.join(PRESETS)}")
    symbols, bond, charge, spin, _ = _PRESETS[key]
    coords = [(0.0, 0.0, 0.0), (0.0, 0.0, bond or 0.0)][: len(symbols)]
    return _build(list(zip(symbols, coords, strict=True)), charge, spin, key)


def resolve(
    system: Any, *, charge: int | None = None, spin: int | None = None, unit: str = "bohr"
) -> Molecule:
    """Molecule from a Molecule, pyscf Mole, preset name, .xyz path or atom string.

    Given charge/spin override the system's (and drop its name if they change it). With
    spin=None the spin is the system's own if its charge is kept, else the lowest allowed.
    """
    _scale(unit)
    if isinstance(system, Molecule) or hasattr(system, "atom_coords"):
        mol = system if isinstance(system, Molecule) else from_pyscf(system)
        if charge is not None and spin is None and charge != mol.charge:
            spin = (mol.n_electrons + mol.charge - charge) % 2
        charge = mol.charge if charge is None else charge
        spin = mol.spin if spin is None else spin
        if (charge, spin) == (mol.charge, mol.spin):
            return mol
        return dataclasses.replace(mol, charge=charge, spin=spin, name=None)
    if not isinstance(system, str | os.PathLike):
        raise InputError(
            f"cannot make a molecule from a {type(system).__name__}; give a preset name, "
            "an atom string, an .xyz path, a Molecule or a pyscf Mole"
        )
    text = os.fspath(system).strip()
    if text.lower() in _PRESET_OF:
        return resolve(preset(text), charge=charge, spin=spin)
    if text.lower().endswith(".xyz") or os.path.isfile(text):
        return from_xyz(text, charge=charge or 0, spin=spin)
    if len(text.split()) == 1 and ";" not in text:
        raise InputError(
            f"{text!r} is neither a preset ({', '.join(PRESETS)}) nor an atom string like "
            "'Li 0 0 0; H 0 0 3.015' nor an .xyz file; use one of those"
        )
    return from_atom_string(text, unit=unit, charge=charge or 0, spin=spin)
