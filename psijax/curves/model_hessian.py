"""A Hessian guessed from a molecule's bonds, for the first steps of a geometry optimisation
(before the forces have measured any curvature): Schlegel's rules (H. B. Schlegel, Theor.
Chim. Acta 66, 333 (1984)).

A bond of length r between atoms of periodic-table rows i and j has the stretch constant
A / (r - B_ij)^3 (Hartree/bohr^2, r in bohr): stiff when compressed, soft when
stretched, which lets one Newton step from a stretched or compressed bond land near its
equilibrium length. An angle between two bonds has the constant 0.160 where both outer
atoms are hydrogens and 0.250 otherwise (Hartree/rad^2). Every other internal direction
(torsions, out-of-plane motions, linear bends) gets ``FLOOR``. Bonds join atoms closer
than ``BONDED`` times the sum of their covalent radii; fragments that no bond joins are
joined by their nearest pair of atoms, so that every internal direction has a curvature.
"""

from __future__ import annotations

import itertools

import numpy as np

from psijax.system.elements import Z_OF

BOHR_PER_ANGSTROM = 1.8897261246257702
# Covalent radii (angstrom), H to Kr: B. Cordero et al., Dalton Trans. 2832 (2008)
# (Mn, Fe, Co low spin).
COVALENT_RADIUS = (
    0.31, 0.28, 1.28, 0.96, 0.84, 0.76, 0.71, 0.66, 0.57, 0.58,
    1.66, 1.41, 1.21, 1.11, 1.07, 1.05, 1.02, 1.06,
    2.03, 1.76, 1.70, 1.60, 1.53, 1.39, 1.39, 1.32, 1.26, 1.24, 1.32, 1.22,
    1.22, 1.20, 1.19, 1.20, 1.20, 1.16,
)  # fmt: skip
STRETCH_A = 1.734
STRETCH_B = {(1, 1): -0.244, (1, 2): 0.352, (2, 2): 1.085, (1, 3): 0.660, (2, 3): 1.522,
             (3, 3): 2.068}  # fmt: skip  # rows beyond the third use the third's
BEND_HH = 0.160
BEND = 0.250
FLOOR = 0.02  # Hartree/bohr^2
BONDED = 1.3
LINEAR = np.deg2rad(175.0)  # a bend this open has no well-defined plane: FLOOR covers it


def _row(symbol: str) -> int:
    z = Z_OF[symbol.lower()]
    return 1 if z <= 2 else 2 if z <= 10 else 3


def stretch_constant(a: str, b: str, r: float) -> float:
    """Schlegel's stretch constant (Hartree/bohr^2) of the bond a-b of length ``r`` bohr."""
    rows = tuple(sorted((_row(a), _row(b))))
    return STRETCH_A / max(r - STRETCH_B[rows], 0.5) ** 3


def bonds(symbols, coords: np.ndarray) -> list[tuple[int, int]]:
    """The bonded pairs (module docstring), every fragment joined to the rest."""
    n = len(symbols)
    radius = np.array([COVALENT_RADIUS[Z_OF[s.lower()] - 1] for s in symbols]) * BOHR_PER_ANGSTROM
    distance = np.linalg.norm(coords[:, None] - coords[None], axis=-1)
    pairs = [(i, j) for i, j in itertools.combinations(range(n), 2)
             if distance[i, j] < BONDED * (radius[i] + radius[j])]  # fmt: skip
    group = list(range(n))

    def root(i: int) -> int:
        while group[i] != i:
            i = group[i]
        return i

    for i, j in pairs:
        group[root(i)] = root(j)
    while len({root(i) for i in range(n)}) > 1:
        i, j = min(((i, j) for i, j in itertools.combinations(range(n), 2)
                    if root(i) != root(j)), key=lambda p: distance[p])  # fmt: skip
        pairs.append((i, j))
        group[root(i)] = root(j)
    return pairs


def _angle(x: np.ndarray, i: int, j: int, k: int) -> float:
    u, v = x[i] - x[j], x[k] - x[j]
    return float(np.arccos(np.clip(u @ v / np.linalg.norm(u) / np.linalg.norm(v), -1, 1)))


def _bend_row(x: np.ndarray, i: int, j: int, k: int, h: float = 1e-5) -> np.ndarray:
    """d angle(i, j, k) / d x, by central differences."""
    row = np.zeros(x.size)
    for index in (*range(3 * i, 3 * i + 3), *range(3 * j, 3 * j + 3), *range(3 * k, 3 * k + 3)):
        plus, minus = x.copy().reshape(-1), x.copy().reshape(-1)
        plus[index] += h
        minus[index] -= h
        row[index] = (_angle(plus.reshape(x.shape), i, j, k)
                      - _angle(minus.reshape(x.shape), i, j, k)) / (2 * h)  # fmt: skip
    return row


def model_hessian(symbols, coords) -> np.ndarray:
    """``[3N, 3N]`` Cartesian Hessian (Hartree/bohr^2) of the model (module docstring),
    not yet projected on the internal space."""
    x = np.asarray(coords, np.float64)
    h = FLOOR * np.eye(x.size)
    pairs = bonds(symbols, x)
    for i, j in pairs:
        r = x[j] - x[i]
        length = float(np.linalg.norm(r))
        b = np.zeros(x.size)
        b[3 * i : 3 * i + 3], b[3 * j : 3 * j + 3] = -r / length, r / length
        h += stretch_constant(symbols[i], symbols[j], length) * np.outer(b, b)
    neighbours = {a: {b for p in pairs for b in p if a in p and b != a} for a in range(len(x))}
    for j, around in neighbours.items():
        for i, k in itertools.combinations(sorted(around), 2):
            if _angle(x, i, j, k) > LINEAR:
                continue
            constant = BEND_HH if symbols[i] == symbols[k] == "H" else BEND
            b = _bend_row(x, i, j, k)
            h += constant * np.outer(b, b)
    return h
