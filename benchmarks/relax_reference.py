"""CCSD(T) equilibrium geometries with pyscf, the references psijax relaxations are compared
with (for two electrons CCSD(T) is full CI).

    python benchmarks/relax_reference.py [--molecule H2O] [--basis cc-pvtz] [--ecp NAME]
                                         [--around X1,X2]

Minimises the CCSD(T) energy (every electron correlated unless an ECP removes the core)
over the molecule's internal coordinates by scipy's Nelder-Mead (to 1e-5 in each) and
prints them with the energy, pyscf's version and the wall time. Molecules:

- ``H2O`` (or any ``AH2`` by ``--atom``): the A-H length (angstrom) and the H-A-H angle
  (degrees), C2v;
- ``H3+``: the side (bohr) of the equilateral triangle.

``--ecp NAME`` puts the ECP on the atoms it has a core for, as ``psijax --ecp NAME`` does
(H stays all-electron), with the ECP's own basis of the same cardinal number there
(``cc-pvtz`` -> ``ccecp-cc-pvtz``).

``--around`` (a larger basis, from a smaller basis's minimum) instead takes one Newton step
from a quadratic through energies at the point and at displacements of the first simplex's
steps (1 + 2n + n(n-1)/2 energies for n coordinates): a few energies instead of a search.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pyscf
from pyscf import cc, gto, scf
from scipy.optimize import minimize


def bent(atom: str, length: float, angle: float) -> str:
    half = np.deg2rad(angle) / 2
    y, z = length * np.sin(half), length * np.cos(half)
    return f"{atom} 0 0 0; H 0 {y} {z}; H 0 {-y} {z}"


def triangle(side: float) -> str:
    height = side * np.sqrt(3) / 2
    return f"H 0 0 0; H {side} 0 0; H {side / 2} {height} 0"


# name: (geometry from the internal coordinates, charge, unit, start, first simplex steps)
MOLECULES = {
    "AH2": (bent, 0, "angstrom", [0.96, 104.5], [0.01, 1.0]),
    "H3+": (lambda side: triangle(side), 1, "bohr", [1.65], [0.02]),
}


def _with_ecp(geometry: str, basis: str, ecp: str | None) -> tuple[dict, dict]:
    """Per element, the basis and the ECP: the ECP only where it removes a core."""
    from pyscf.gto import basis as tables

    symbols = {item.split()[0] for item in geometry.split(";")}
    cored = {s for s in symbols if ecp and tables.load_ecp(ecp, s) and tables.load_ecp(ecp, s)[0]}
    return ({s: f"{ecp}-{basis}" if s in cored else basis for s in symbols},
            {s: ecp for s in cored})  # fmt: skip


def energy(geometry: str, charge: int, unit: str, basis: str, ecp: str | None) -> float:
    bases, ecps = _with_ecp(geometry, basis, ecp)
    mol = gto.M(atom=geometry, charge=charge, unit=unit, basis=bases, ecp=ecps, verbose=0)
    mean_field = scf.RHF(mol).run(conv_tol=1e-11)
    coupled = cc.CCSD(mean_field).run(conv_tol=1e-9)
    return float(coupled.e_tot + coupled.ccsd_t())


def newton(fun, x0: np.ndarray, steps: np.ndarray) -> tuple[np.ndarray, float, int]:
    """The minimum of the quadratic through ``fun`` at ``x0`` and at displacements by
    ``steps`` (central differences; one corner per pair for the mixed terms), its
    predicted value and the number of energies."""
    n = len(x0)
    unit = np.eye(n) * steps
    e0 = fun(x0)
    plus = [fun(x0 + unit[i]) for i in range(n)]
    minus = [fun(x0 - unit[i]) for i in range(n)]
    gradient = np.array([(plus[i] - minus[i]) / (2 * steps[i]) for i in range(n)])
    hessian = np.diag([(plus[i] - 2 * e0 + minus[i]) / steps[i] ** 2 for i in range(n)])
    for i in range(n):
        for j in range(i + 1, n):
            corner = fun(x0 + unit[i] + unit[j])
            hessian[i, j] = hessian[j, i] = (corner - plus[i] - plus[j] + e0) / (
                steps[i] * steps[j]
            )
    move = -np.linalg.solve(hessian, gradient)
    return x0 + move, float(e0 + gradient @ move / 2), 1 + 2 * n + n * (n - 1) // 2


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--molecule", default="H2O", help="H2O (AH2 with --atom) or H3+")
    parser.add_argument("--atom", default="O")
    parser.add_argument("--basis", default="cc-pvtz")
    parser.add_argument("--ecp", default=None)
    parser.add_argument("--around", default=None, help="X1,X2: one Newton step from there")
    args = parser.parse_args()
    started = time.perf_counter()
    key = "H3+" if args.molecule == "H3+" else "AH2"
    build, charge, unit, x0, steps = MOLECULES[key]
    geometry = (lambda x: build(args.atom, *x)) if key == "AH2" else (lambda x: build(*x))

    def fun(x):
        return energy(geometry(x), charge, unit, args.basis, args.ecp)

    if args.around:
        start = np.array([float(v) for v in args.around.split(",")])
        x, value, count = newton(fun, start, np.asarray(steps, float))
        how = f"one Newton step from {args.around}"
    else:
        simplex = [x0] + [list(np.add(x0, np.eye(len(x0))[i] * steps[i])) for i in range(len(x0))]
        options = {"xatol": 1e-5, "fatol": 1e-10, "initial_simplex": simplex}
        found = minimize(fun, x0, method="Nelder-Mead", options=options)
        x, value, count, how = found.x, found.fun, found.nfev, "Nelder-Mead"
    method = f"CCSD(T)/{args.basis}" + (f" {args.ecp}" if args.ecp else "")
    print(f"# pyscf {pyscf.__version__}, {method}, {how}, {time.perf_counter() - started:.0f} s")
    values = ", ".join(f"{v:.5f}" for v in x)
    print(f"{args.molecule}: internal coordinates ({unit}{', degrees' * (key == 'AH2')}) "
          f"{values}; E = {value:.8f} Ha ({count} energies)")  # fmt: skip


if __name__ == "__main__":
    main()
