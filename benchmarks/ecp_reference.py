"""Reference energies of an ECP atom with pyscf: ROHF, CCSD(T) and full CI per basis.

    python benchmarks/ecp_reference.py [--atom "C 0 0 0"] [--spin 2] [--ecp ccecp]
                                       [--bases ccecp-cc-pvdz ccecp-cc-pvtz ccecp-cc-pvqz]
                                       [--fci-up-to ccecp-cc-pvtz]

For the basis sequence X = 2, 3, 4(, 5) the correlation energy is extrapolated to the
complete basis with E_c(X) = E_c(CBS) + A / X^3 from the two largest bases (Helgaker et
al., J. Chem. Phys. 106, 9639 (1997)), the ROHF energy taken from the largest basis; the
basis-set error is estimated as the difference between that extrapolation and the one
from the two bases below. Full CI (pyscf's direct solver, frozen nothing) where it fits.
"""

from __future__ import annotations

import argparse
import time

from pyscf import cc, fci, gto, scf


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--atom", default="C 0 0 0")
    parser.add_argument("--spin", type=int, default=2)
    parser.add_argument("--ecp", default="ccecp")
    bases = ["ccecp-cc-pvdz", "ccecp-cc-pvtz", "ccecp-cc-pvqz", "ccecp-cc-pv5z"]
    parser.add_argument("--bases", nargs="+", default=bases)
    parser.add_argument("--fci-up-to", default="ccecp-cc-pvtz")
    args = parser.parse_args()
    print(f"# {args.atom}, spin {args.spin}, ECP {args.ecp}: pyscf references")
    print("| basis | X | ROHF (Ha) | CCSD(T) (Ha) | (T) correlation (Ha) | FCI (Ha) | seconds |")
    print("|---|---|---|---|---|---|---|")
    rows = []
    fci_allowed = True
    for X, basis in enumerate(args.bases, start=2):
        t0 = time.perf_counter()
        mol = gto.M(atom=args.atom, basis=basis, ecp=args.ecp, spin=args.spin, verbose=0)
        mf = scf.ROHF(mol).run(conv_tol=1e-10)
        ccsd = cc.UCCSD(scf.addons.convert_to_uhf(mf)).run(conv_tol=1e-9)
        e_ccsd_t = ccsd.e_tot + ccsd.ccsd_t()
        e_fci = None
        if fci_allowed:
            e_fci = fci.FCI(mf).kernel()[0] if mol.nelectron > 1 else None
        if basis == args.fci_up_to:
            fci_allowed = False
        rows.append((X, mf.e_tot, e_ccsd_t))
        fci_text = "" if e_fci is None else f"{e_fci:.6f}"
        print(
            f"| {basis} | {X} | {mf.e_tot:.6f} | {e_ccsd_t:.6f} | {e_ccsd_t - mf.e_tot:.6f} | "
            f"{fci_text} | {time.perf_counter() - t0:.0f} |",
            flush=True,
        )

    def cbs(a, b):
        (xa, _, ea), (xb, hf_b, eb) = a, b
        ca, cb = ea - a[1], eb - hf_b
        c = (cb * xb**3 - ca * xa**3) / (xb**3 - xa**3)
        return hf_b + c

    if len(rows) >= 3:
        best, below = cbs(rows[-2], rows[-1]), cbs(rows[-3], rows[-2])
        print(
            f"\nCCSD(T)/CBS from X = {rows[-2][0]},{rows[-1][0]}: {best:.6f} Ha; from "
            f"X = {rows[-3][0]},{rows[-2][0]}: {below:.6f} Ha; basis-set error estimate "
            f"{abs(best - below) * 1e3:.2f} mHa"
        )


if __name__ == "__main__":
    main()
