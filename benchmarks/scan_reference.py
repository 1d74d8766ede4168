"""A reference energy curve of a diatomic with pyscf: CCSD(T) at the complete-basis limit,
plus what full CI adds to CCSD(T) in a smaller basis.

    python benchmarks/scan_reference.py [--atoms Li,H] [--lengths 2.5:4.5:8]
                                        [--fci-basis cc-pcvdz] [--small cc-pcvtz]
                                        [--large cc-pcvqz] [--out ref.csv]

At each bond length (bohr): E = CCSD(T)/CBS + [FCI - CCSD(T)]/fci-basis, where CCSD(T)/CBS
takes the Hartree-Fock energy from the large basis and extrapolates the correlation energy
of the small and large bases (cardinal numbers X = 3, 4) as X^-3. Every electron is
correlated; hydrogen, which has no core-valence set, takes the valence one (cc-pVXZ).
Writes ``length,energy`` to ``--out`` (what ``benchmarks/scan_cost.py
--reference`` reads) and prints the parts, the minimum of a cubic spline through the
points, pyscf's version and the wall time.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pyscf
from pyscf import cc, fci, gto, scf
from scipy.interpolate import CubicSpline


def _basis(symbol: str, name: str) -> str:
    """``name`` for ``symbol``, or its valence-only counterpart where the element has no
    core-valence set (hydrogen: cc-pCVXZ -> cc-pVXZ)."""
    try:
        gto.basis.load(name, symbol)
        return name
    except (gto.basis.BasisNotFoundError, RuntimeError, KeyError):
        return name.replace("pcv", "pv").replace("pCV", "pV")


def _mol(atoms, length, basis):
    return gto.M(atom=f"{atoms[0]} 0 0 0; {atoms[1]} 0 0 {length}", unit="bohr",
                 basis={a: _basis(a, basis) for a in atoms}, verbose=0)  # fmt: skip


def _ccsd_t(mol) -> tuple[float, float]:
    """(Hartree-Fock, CCSD(T) correlation) energies."""
    mean_field = scf.RHF(mol).run(conv_tol=1e-11)
    coupled = cc.CCSD(mean_field).run(conv_tol=1e-9)
    return float(mean_field.e_tot), float(coupled.e_corr + coupled.ccsd_t())


def point(atoms, length: float, fci_basis: str, small: str, large: str) -> dict:
    mol = _mol(atoms, length, fci_basis)
    mean_field = scf.RHF(mol).run(conv_tol=1e-11)
    hf, corr = _ccsd_t(mol)
    beyond = float(fci.FCI(mean_field).kernel()[0]) - (hf + corr)  # FCI - CCSD(T)
    _, corr_small = _ccsd_t(_mol(atoms, length, small))
    hf_large, corr_large = _ccsd_t(_mol(atoms, length, large))
    cbs = hf_large + (4**3 * corr_large - 3**3 * corr_small) / (4**3 - 3**3)
    return {"length": length, "cbs": cbs, "beyond": beyond, "energy": cbs + beyond}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--atoms", default="Li,H")
    parser.add_argument("--lengths", default="2.5:4.5:8")
    parser.add_argument("--fci-basis", default="cc-pcvdz")
    parser.add_argument("--small", default="cc-pcvtz")
    parser.add_argument("--large", default="cc-pcvqz")
    parser.add_argument("--out", default="scan_reference.csv")
    args = parser.parse_args()
    atoms = args.atoms.split(",")
    start, stop, count = args.lengths.split(":")
    lengths = np.linspace(float(start), float(stop), int(count))
    started = time.perf_counter()
    rows = []
    print("| R (bohr) | CCSD(T)/CBS (Ha) | FCI - CCSD(T) (mHa) | reference (Ha) |")
    print("|---|---|---|---|")
    for length in lengths:
        row = point(atoms, float(length), args.fci_basis, args.small, args.large)
        rows.append(row)
        print(f"| {length:.4f} | {row['cbs']:.6f} | {row['beyond'] * 1e3:+.3f} | "
              f"{row['energy']:.6f} |", flush=True)  # fmt: skip
    with open(args.out, "w") as f:
        f.write("length,energy\n")
        f.writelines(f"{r['length']:.6f},{r['energy']:.8f}\n" for r in rows)
    line = (f"# pyscf {pyscf.__version__}, CCSD(T) {args.small}->{args.large} X^-3 + (FCI - "
            f"CCSD(T))/{args.fci_basis}, {time.perf_counter() - started:.0f} s")  # fmt: skip
    if len(rows) >= 3:
        spline = CubicSpline([r["length"] for r in rows], [r["energy"] for r in rows])
        grid = np.linspace(lengths[0], lengths[-1], 20001)
        best = grid[np.argmin(spline(grid))]
        line += f"; spline minimum {best:.4f} bohr, {float(spline(best)):.6f} Ha"
    print(line)


if __name__ == "__main__":
    main()
