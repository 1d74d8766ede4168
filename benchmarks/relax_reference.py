"""CCSD(T) equilibrium geometries with pyscf, the references psijax relaxations are compared
with (for two electrons CCSD(T) is full CI).

    python benchmarks/relax_reference.py [--molecule H2O] [--basis cc-pvtz] [--ecp NAME]

Minimises the CCSD(T) energy (every electron correlated unless an ECP removes the core)
over the molecule's internal coordinates by scipy's Nelder-Mead (to 1e-5 in each) and
prints them with the energy, pyscf's version and the wall time. Molecules:

- ``H2O`` (or any ``AH2`` by ``--atom``): the A-H length (angstrom) and the H-A-H angle
  (degrees), C2v;
- ``H3+``: the side (bohr) of the equilateral triangle.
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


def energy(geometry: str, charge: int, unit: str, basis: str, ecp: str | None) -> float:
    mol = gto.M(atom=geometry, charge=charge, unit=unit, basis=basis, ecp=ecp or {}, verbose=0)
    mean_field = scf.RHF(mol).run(conv_tol=1e-11)
    coupled = cc.CCSD(mean_field).run(conv_tol=1e-9)
    return float(coupled.e_tot + coupled.ccsd_t())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--molecule", default="H2O", help="H2O (AH2 with --atom) or H3+")
    parser.add_argument("--atom", default="O")
    parser.add_argument("--basis", default="cc-pvtz")
    parser.add_argument("--ecp", default=None)
    args = parser.parse_args()
    started = time.perf_counter()
    key = "H3+" if args.molecule == "H3+" else "AH2"
    build, charge, unit, x0, steps = MOLECULES[key]
    geometry = (lambda x: build(args.atom, *x)) if key == "AH2" else (lambda x: build(*x))
    simplex = [x0] + [list(np.add(x0, np.eye(len(x0))[i] * steps[i])) for i in range(len(x0))]
    found = minimize(
        lambda x: energy(geometry(x), charge, unit, args.basis, args.ecp), x0,
        method="Nelder-Mead",
        options={"xatol": 1e-5, "fatol": 1e-10, "initial_simplex": simplex},
    )  # fmt: skip
    method = f"CCSD(T)/{args.basis}" + (f" {args.ecp}" if args.ecp else "")
    print(f"# pyscf {pyscf.__version__}, {method}, {time.perf_counter() - started:.0f} s")
    values = ", ".join(f"{v:.5f}" for v in found.x)
    print(f"{args.molecule}: internal coordinates ({unit}{', degrees' * (key == 'AH2')}) "
          f"{values}; E = {found.fun:.8f} Ha ({found.nfev} energies)")  # fmt: skip


if __name__ == "__main__":
    main()
