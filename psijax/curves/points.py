"""The geometries of a scan: one bond stretched (``along_bond``) or the frames of a
multi-frame .xyz file (``frames``), each a ``(coordinate, Molecule)`` point."""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from psijax.errors import InputError
from psijax.system import Molecule
from psijax.system.parse import resolve

ANGSTROM = 1.8897261246257702  # bohr
CLOSEST = 0.2  # bohr: two nuclei nearer than this are "on top of each other"

Point = tuple[float, Molecule]


def config_at(config, molecule: Molecule, out) -> object:
    """``config`` (a ``psijax.Config``) for ``molecule`` (its atoms in bohr, charge and spin),
    writing to ``out``: one point of a scan or one cycle of a relaxation."""
    return dataclasses.replace(
        config, system=molecule.atom_string(), unit="bohr", charge=molecule.charge,
        spin=molecule.spin, out=str(out),
    )  # fmt: skip


def parse_lengths(text: str) -> list[float]:
    """``"2.5:4.5:9"`` (9 evenly spaced values from 2.5 to 4.5) or ``"2.5,3,3.5"``."""
    try:
        if ":" in text:
            start, stop, count = text.split(":")
            if int(count) < 2:
                raise ValueError
            return [float(x) for x in np.linspace(float(start), float(stop), int(count))]
        return [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise InputError(
            f"--lengths {text!r} is not a range or a list; give START:STOP:COUNT "
            "(e.g. 2.5:4.5:9, at least 2 points) or comma-separated lengths (e.g. 2.5,3.0,3.5)"
        ) from None


def along_bond(molecule: Molecule, bond: str, lengths: Sequence[float], unit: str) -> list[Point]:
    """``molecule`` with the second atom of ``bond`` ("I-J", atom numbers from 1 in the
    molecule's order) moved along the I-J line so that the two are each length apart
    (``unit``: bohr or angstrom); the other atoms stay."""
    if getattr(molecule, "lattice", None) is not None and not molecule.n_atoms:
        raise InputError(
            "a scan moves nuclei and the electron gas has none; give a molecule, or train the "
            "gas at each --rs with psijax train"
        )
    if getattr(molecule, "lattice", None) is not None:
        raise InputError(
            "a scan of a crystal is not built (a nucleus moved alone breaks the cell's "
            "symmetry); train each geometry with psijax train --lattice"
        )
    n = len(molecule.symbols)
    found = re.fullmatch(r"\s*(\d+)\s*-\s*(\d+)\s*", bond)
    if found is None:
        raise InputError(
            f"--bond {bond!r} names no atom pair; give two atom numbers like 1-2 (from 1, in "
            "the order of --system)"
        )
    i, j = int(found[1]) - 1, int(found[2]) - 1
    if n < 2 or i == j or not (0 <= i < n and 0 <= j < n):
        raise InputError(
            f"--bond {bond!r} names no atom pair of this molecule of {n} atom(s); give two "
            f"different atom numbers from 1 to {n}"
            + ("" if n >= 2 else " (a single atom has no bond to scan)")
        )
    if not lengths:
        raise InputError("--lengths gives no length; give e.g. 2.5:4.5:9")
    scale = ANGSTROM if unit == "angstrom" else 1.0
    coords = np.asarray(molecule.coords, np.float64)
    axis = coords[j] - coords[i]
    axis = axis / np.linalg.norm(axis)
    points = []
    for length in lengths:
        moved = coords.copy()
        moved[j] = coords[i] + length * scale * axis
        check_apart(moved, molecule.symbols, f"--lengths value {length:g}")
        points.append((float(length), dataclasses.replace(molecule, coords=_as_tuples(moved))))
    return points


def frames(path: str | os.PathLike, *, charge: int = 0, spin: int | None = None) -> list[Point]:
    """The geometries of a multi-frame .xyz file (angstrom), numbered from 0."""
    shown = os.fspath(path)
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise InputError(
            f"xyz file {shown!r} does not exist; give the path of an .xyz file"
        ) from None
    points, at = [], 0
    while at < len(lines):
        if not lines[at].strip():
            at += 1
            continue
        try:
            count = int(lines[at].split()[0])
        except ValueError:
            raise InputError(
                f"xyz file {shown!r}, line {at + 1}: {lines[at]!r} is not an atom count; each "
                "frame is an atom count, a comment line, then that many 'Sym x y z' lines"
            ) from None
        atoms = lines[at + 2 : at + 2 + count]
        if len(atoms) < count:
            raise InputError(
                f"xyz file {shown!r}: frame {len(points)} promises {count} atoms and has "
                f"{len(atoms)}; complete it or remove it"
            )
        text = "; ".join(" ".join(line.split()[:4]) for line in atoms)
        molecule = resolve(text, charge=charge, spin=spin, unit="angstrom")
        check_apart(np.asarray(molecule.coords), molecule.symbols, f"frame {len(points)}")
        points.append((float(len(points)), molecule))
        at += 2 + count
    if not points:
        raise InputError(f"xyz file {shown!r} has no frame; write at least one geometry")
    first = points[0][1].symbols
    for index, (_, molecule) in enumerate(points):
        if molecule.symbols != first:
            raise InputError(
                f"xyz file {shown!r}: frame {index} has atoms {' '.join(molecule.symbols)} "
                f"where frame 0 has {' '.join(first)}; a scan keeps the same atoms in order"
            )
    return points


def check_apart(coords: np.ndarray, symbols, where: str) -> None:
    distance = np.linalg.norm(coords[:, None] - coords[None], axis=-1)
    distance[np.diag_indices(len(coords))] = np.inf
    a, b = np.unravel_index(np.argmin(distance), distance.shape)
    if distance[a, b] < CLOSEST:
        raise InputError(
            f"{where} puts atoms {a + 1} ({symbols[a]}) and {b + 1} ({symbols[b]}) "
            f"{distance[a, b]:.3g} bohr apart, on top of each other; keep nuclei at least "
            f"{CLOSEST} bohr apart"
        )


def _as_tuples(coords: np.ndarray) -> tuple:
    return tuple(tuple(float(c) for c in row) for row in coords)
