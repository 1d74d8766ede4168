"""The CCSD(T) equilibrium geometry of a bent AH2 molecule (water by default) with pyscf,
the reference a psijax relaxation is compared with.

    python benchmarks/relax_reference.py [--atom O] [--basis cc-pvtz] [--ecp NAME]
                                         [--start 0.96,104.5]

Minimises the CCSD(T) energy (every electron correlated unless an ECP removes the core)
over the two internal coordinates of the C2v molecule, the A-H length (angstrom) and the
H-A-H angle (degrees), by scipy's Nelder-Mead to 1e-5 angstrom and 1e-3 degrees, and
prints them with the energy, pyscf's version and the wall time.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pyscf
from pyscf import cc, gto, scf
from scipy.optimize import minimize


def energy(atom: str, length: float, angle: float, basis: str, ecp: str | None) -> float:
    half = np.deg2rad(angle) / 2
    geometry = (f"{atom} 0 0 0; H 0 {length * np.sin(half)} {length * np.cos(half)}; "
                f"H 0 {-length * np.sin(half)} {length * np.cos(half)}")  # fmt: skip
    mol = gto.M(atom=geometry, basis=basis, ecp=ecp or {}, verbose=0)
    mean_field = scf.RHF(mol).run(conv_tol=1e-11)
    coupled = cc.CCSD(mean_field).run(conv_tol=1e-9)
    return float(coupled.e_tot + coupled.ccsd_t())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--atom", default="O")
    parser.add_argument("--basis", default="cc-pvtz")
    parser.add_argument("--ecp", default=None)
    parser.add_argument("--start", default="0.96,104.5")
    args = parser.parse_args()
    started = time.perf_counter()
    x0 = [float(v) for v in args.start.split(",")]
    found = minimize(
        lambda x: energy(args.atom, x[0], x[1], args.basis, args.ecp), x0,
        method="Nelder-Mead", options={"xatol": 1e-5, "fatol": 1e-9, "initial_simplex":
                                       [x0, [x0[0] + 0.01, x0[1]], [x0[0], x0[1] + 1.0]]},
    )  # fmt: skip
    length, angle = found.x
    method = f"CCSD(T)/{args.basis}" + (f" {args.ecp}" if args.ecp else "")
    seconds = time.perf_counter() - started
    print(f"# pyscf {pyscf.__version__}, {method}, {seconds:.0f} s")
    bohr = length * 1.8897261246257702
    print(
        f"{args.atom}H2: r = {length:.5f} angstrom ({bohr:.5f} bohr), angle = {angle:.3f} "
        f"degrees, E = {found.fun:.8f} Ha ({found.nfev} energies)"
    )


if __name__ == "__main__":
    main()
