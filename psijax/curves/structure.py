"""A relaxed geometry as chemists read it: its bond lengths and angles, each with the error
bar the forces' noise leaves on where the minimum lies.

The bonds are ``psijax.curves.model_hessian``'s (atoms closer than 1.3 times the sum of
their covalent radii, fragments joined), the angles every pair of bonds at one atom. The
error bars: the forces at the last geometry F (each internal component with its error
bar) put the minimum at x + H^-1 F, H the relaxation's own Hessian there (the model with
its BFGS updates, ``psijax.curves.geometry.hessian``); drawing F from its error bars
(independent normal components, ``DRAWS`` draws) and taking the standard deviation of each
coordinate of that minimum gives its error bar. The values are the last geometry's, the
one ``final.xyz`` holds: where the relaxation stopped with zero forces, the minimum lies
within about two of these error bars of it.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np

from psijax.curves import geometry
from psijax.curves.model_hessian import BOHR_PER_ANGSTROM, bonds

DRAWS = 4000


def coordinates(symbols: Sequence[str], coords: np.ndarray) -> dict[str, float]:
    """Bond lengths (angstrom) and angles (degrees) of ``coords`` (bohr), named by their
    atoms numbered from 1 as in the molecule: ``O1-H2``, ``H2-O1-H3``."""
    x = np.asarray(coords, np.float64)
    name = [f"{s}{k + 1}" for k, s in enumerate(symbols)]
    pairs = sorted(tuple(sorted(p)) for p in bonds(symbols, x))
    values = {
        f"{name[i]}-{name[j]}": float(np.linalg.norm(x[i] - x[j]) / BOHR_PER_ANGSTROM)
        for i, j in pairs
    }
    for centre in range(len(x)):
        ends = sorted(j if i == centre else i for i, j in pairs if centre in (i, j))
        for a, b in itertools.combinations(ends, 2):
            u, v = x[a] - x[centre], x[b] - x[centre]
            cosine = np.clip(u @ v / np.linalg.norm(u) / np.linalg.norm(v), -1.0, 1.0)
            values[f"{name[a]}-{name[centre]}-{name[b]}"] = float(np.degrees(np.arccos(cosine)))
    return values


def with_errors(
    history: Sequence[geometry.Forces], symbols: Sequence[str], seed: int = 0
) -> dict[str, tuple[float, float]]:
    """Each internal coordinate of the history's last geometry with its error bar (module
    docstring): ``{name: (value, error)}``, angstrom and degrees."""
    last = history[-1]
    values, vectors = np.linalg.eigh(geometry.hessian(history, symbols))
    keep = values > 1e-8 * max(values.max(), 1e-300)
    inverse = vectors[:, keep] @ np.diag(1 / values[keep]) @ vectors[:, keep].T
    p = geometry.projector(last.coords)
    noise = np.random.default_rng(seed).normal(size=(DRAWS, last.values.size))
    forces = last.values.reshape(-1) + noise * last.errors.reshape(-1)
    minima = last.coords.reshape(-1) + forces @ p @ inverse
    drawn = [coordinates(symbols, m.reshape(last.coords.shape)) for m in minima]
    here = coordinates(symbols, last.coords)
    return {k: (v, float(np.std([d[k] for d in drawn]))) for k, v in here.items()}


def describe(values: dict[str, tuple[float, float]]) -> str:
    """``O1-H2 0.9577 +- 0.0012 A, H2-O1-H3 104.2 +- 0.4 deg``."""
    parts = []
    for name, (value, error) in values.items():
        angle = name.count("-") == 2
        digits = 2 if angle else 4
        unit = "deg" if angle else "A"
        parts.append(f"{name} {value:.{digits}f} +- {error:.{digits}f} {unit}")
    return ", ".join(parts)
