"""Molecules from text: pyscf-style atom strings, .xyz files, built pyscf ``Mole``s, and
``resolve``, which takes any of those or a preset name."""

from __future__ import annotations

import dataclasses
import math
import os
from typing import Any

import numpy as np

from psijax.errors import InputError
from psijax.system import crystal, electron_gas
from psijax.system import ecp as ecp_tables
from psijax.system.elements import Z_OF, symbol_of
from psijax.system.molecule import BOHR_PER_ANGSTROM, Coord, Molecule
from psijax.system.presets import PRESET_OF, PRESETS, REFERENCES


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
    symbol = symbol_of(fields[0], where)
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


def build(
    atoms: list[tuple[str, Coord]], charge: int, spin: int | None, name: str | None
) -> Molecule:
    if not atoms:
        raise InputError("the molecule has no atoms; give at least one, e.g. 'H 0 0 0'")
    symbols = tuple(s for s, _ in atoms)
    charges = tuple(float(Z_OF[s.lower()]) for s in symbols)
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
    return build(atoms, charge, spin, name)


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
    return build(atoms, charge, spin, stem or None)


def from_pyscf(mol: Any, *, name: str | None = None) -> Molecule:
    """Molecule of a built pyscf `Mole` (coordinates in bohr), with its ECPs if named ones."""
    if not getattr(mol, "_built", True):
        raise InputError("the pyscf Mole is not built; call mol.build() before passing it")
    spec = None
    if mol.has_ecp():
        given = mol.ecp
        if isinstance(given, dict) and all(isinstance(v, str) for v in given.values()):
            spec = " ".join(f"{k}:{v}" for k, v in given.items())
        elif isinstance(given, str):
            spec = given
        else:
            raise InputError(
                "the pyscf Mole's ECP is not given by table names; name pyscf tables "
                "(mol.ecp = 'ccecp' or {'Cl': 'ccecp'}) or pass ecp= to psijax"
            )
    symbols = [
        symbol_of(mol.atom_pure_symbol(i), f"in atom {i + 1} of the pyscf Mole")
        for i in range(mol.natm)
    ]
    coords = [tuple(float(x) for x in c) for c in np.asarray(mol.atom_coords(unit="Bohr"))]
    core = sum(int(mol.atom_nelec_core(i)) for i in range(mol.natm)) if spec else 0
    molecule = build(list(zip(symbols, coords, strict=True)), int(mol.charge), int(mol.spin), name)
    if spec is None:
        return molecule
    with_ecp = dataclasses.replace(molecule, ecp=ecp_tables.assign(spec, molecule.symbols))
    if sum(with_ecp.core_electrons) != core:
        raise InputError(
            f"the pyscf Mole's ECPs remove {core} core electrons, psijax's reading of "
            f"{spec!r} {sum(with_ecp.core_electrons)}; name the elements "
            "(mol.ecp = {'Cl': 'ccecp'})"
        )
    return with_ecp


def preset(name: str) -> Molecule:
    """One of PRESETS (case-insensitive) at the reference geometry, charge and spin."""
    key = PRESET_OF.get(name.strip().lower())
    if key is None:
        raise InputError(f"unknown preset {name!r}; use one of {', '.join(PRESETS)}")
    symbols, bond, charge, spin, _ = REFERENCES[key]
    coords = [(0.0, 0.0, 0.0), (0.0, 0.0, bond or 0.0)][: len(symbols)]
    return build(list(zip(symbols, coords, strict=True)), charge, spin, key)


def resolve(
    system: Any,
    *,
    charge: int | None = None,
    spin: int | None = None,
    unit: str = "bohr",
    ecp: str | None = None,
) -> Molecule:
    """Molecule from a Molecule, pyscf Mole, preset name, .xyz path or atom string.

    Given charge/spin override the system's (and drop its name if they change it). With
    spin=None the spin is the system's own if its charge is kept, else the lowest allowed.
    ``ecp`` (``"ccecp"`` or ``"Cl:ccecp Na:ccecp"``; ``psijax.system.ecp.assign``) gives
    atoms effective core potentials.
    """
    if ecp is None or not str(ecp).strip():
        return _resolve(system, charge=charge, spin=spin, unit=unit)
    # the spin is checked against the valence electrons (cores hold an even number)
    molecule = _resolve(system, charge=charge, spin=None, unit=unit)
    with_ecp = dataclasses.replace(molecule, ecp=ecp_tables.assign(ecp, molecule.symbols))
    if spin is None or spin == with_ecp.spin:
        return with_ecp
    return dataclasses.replace(with_ecp, spin=spin, name=None)


def for_config(config: Any) -> Molecule | electron_gas.ElectronGas:
    """The system of a run's config: the electron gas (``system = "heg"`` with its
    ``electrons`` and ``rs``, ``psijax.system.electron_gas.from_config``), else the molecule
    of its system, charge, spin, unit and ecp, in the cell of ``lattice`` where one is
    given (a ``psijax.system.Crystal``)."""
    lattice = getattr(config, "lattice", None)
    if electron_gas.is_named(config.system):
        if lattice is not None:
            raise InputError(
                "the electron gas's cell follows from --electrons and --rs; leave --lattice out"
            )
        return electron_gas.from_config(config)
    if getattr(config, "electrons", None) is not None or getattr(config, "rs", None) is not None:
        raise InputError(
            "--electrons and --rs describe the electron gas; give --system heg with them, or "
            "leave them out for a molecule"
        )
    if getattr(config, "twist", None) is not None:
        raise InputError(
            "--twist is built for the electron gas only (a molecule has no cell, a crystal "
            "is solved at the Gamma point); leave it out, or give --system heg"
        )
    molecule = resolve(
        config.system, charge=config.charge, spin=config.spin, unit=config.unit, ecp=config.ecp
    )
    return molecule if lattice is None else crystal.from_config(molecule, config)


def _resolve(system: Any, *, charge: int | None, spin: int | None, unit: str) -> Molecule:
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
    if text.lower() in PRESET_OF:
        return _resolve(preset(text), charge=charge, spin=spin, unit=unit)
    if text.lower().endswith(".xyz") or os.path.isfile(text):
        return from_xyz(text, charge=charge or 0, spin=spin)
    if len(text.split()) == 1 and ";" not in text:
        raise InputError(
            f"{text!r} is neither a preset ({', '.join(PRESETS)}) nor an atom string like "
            "'Li 0 0 0; H 0 0 3.015' nor an .xyz file; use one of those"
        )
    return from_atom_string(text, unit=unit, charge=charge or 0, spin=spin)
