"""Forces against the finite-difference derivative of the evaluated energy over bond length.

    python benchmarks/forces_scan.py [--system H2] [--bonds 1.25,1.30,1.35,1.40]
                                     [--train-steps 1000] [--eval-steps 2000] [--out DIR]
                                     [--ecp ccecp] [--reference]

Trains the default network at each bond length of a diatomic (first atom at the origin,
second on +z), evaluates every run with forces, and prints per geometry the evaluated
energy and the force on the second nucleus along the bond (total and Hellmann-Feynman
part), then, at each inner bond length, the central difference
-(E(R + d) - E(R - d)) / (2 d) of the evaluated energies beside the force there, with
their difference in combined error bars. Each training is its own optimisation, so the
finite difference also carries how far each is from its optimum.
A run directory already holding a finished training and evaluation is reused.
``--ecp`` trains with effective core potentials (``--system LiH --ecp ccecp``: two valence
electrons); ``--reference`` adds, at every bond length, pyscf's derivative -dE/dR of
CCSD (full CI for two electrons; central difference over +-0.005 bohr) with the same ECP
in the ECP's QZ and 5Z valence bases (cc-pVQZ / cc-pV5Z on atoms without ECP): exact for
two electrons up to the basis, so the force is checked against pyscf rather than against
psijax's own energies.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import time
from pathlib import Path

import jax

import psijax

DIATOMICS = {"H2": ("H", "H"), "LiH": ("Li", "H")}


def run_geometry(atoms, bond, args) -> dict:
    out = Path(args.out) / f"{args.system}_{bond:.4f}"
    summary = out / "eval" / "summary.json"
    if not summary.is_file():
        t = time.perf_counter()
        psijax.train(
            system=f"{atoms[0]} 0 0 0; {atoms[1]} 0 0 {bond}", steps=args.train_steps,
            out=str(out), progress=False, force=True, seed=args.seed, ecp=args.ecp,
        )  # fmt: skip
        t_train = time.perf_counter() - t
        t = time.perf_counter()
        psijax.evaluate(out, steps=args.eval_steps, progress=False, force=True)
        print(f"# R={bond}: trained in {t_train:.0f} s, evaluated in "
              f"{time.perf_counter() - t:.0f} s", flush=True)  # fmt: skip
    data = json.loads(summary.read_text())["estimates"]
    get = lambda k: (data[k]["mean"], data[k]["error"])
    return dict(
        bond=bond, energy=get("energy"), force=get("force_1_z"), hf=get("force_hf_1_z"),
        force_a=get("force_0_z"),
    )  # fmt: skip


def reference_force(atoms, bond: float, ecp: str, cardinal: str, h: float = 0.005) -> float:
    """-dE/dR of pyscf's CCSD (full CI for two electrons) with ``ecp`` on every atom the
    table has a core for, in that ECP's ``cardinal`` (QZ, 5Z) valence basis, the
    all-electron cc basis on the others; the central difference over +-h bohr."""
    from pyscf import cc, gto, scf

    from psijax.system import ecp as tables

    def energy(r: float) -> float:
        with_core = [
            a for a in atoms if (tables.load(ecp, a) or None) and tables.load(ecp, a).n_core
        ]
        mol = gto.M(
            atom=f"{atoms[0]} 0 0 0; {atoms[1]} 0 0 {r}", unit="bohr", verbose=0,
            ecp={a: ecp for a in with_core},
            basis={a: f"{ecp}-cc-pv{cardinal}" if a in with_core else f"cc-pv{cardinal}"
                   for a in atoms},
        )  # fmt: skip
        return float(cc.CCSD(scf.RHF(mol).run()).run().e_tot)

    return -(energy(bond + h) - energy(bond - h)) / (2 * h)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--system", default="H2", choices=sorted(DIATOMICS))
    parser.add_argument("--bonds", default="1.25,1.30,1.35,1.40")
    parser.add_argument("--train-steps", type=int, default=1000)
    parser.add_argument("--eval-steps", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="runs/forces_scan")
    parser.add_argument("--ecp", default=None, help="e.g. ccecp")
    parser.add_argument(
        "--reference",
        action="store_true",
        help="pyscf's full-CI -dE/dR at every bond (two valence electrons)",
    )
    args = parser.parse_args()
    bonds = [float(b) for b in args.bonds.split(",")]
    load = os.getloadavg()[0]
    rows = [run_geometry(DIATOMICS[args.system], b, args) for b in bonds]
    print(f"# {args.system}, training {args.train_steps} steps (defaults otherwise), "
          f"evaluation {args.eval_steps} steps; psijax {psijax.__version__}, jax "
          f"{jax.__version__}, python {platform.python_version()}; load {load:.1f} -> "
          f"{os.getloadavg()[0]:.1f}")  # fmt: skip
    print("| R (bohr) | E (Ha) | force on 2nd nucleus, z (mHa/bohr) | Hellmann-Feynman part "
          "| force on 1st, z |")  # fmt: skip
    print("|---|---|---|---|---|")
    fmt = lambda v, scale=1000: f"{scale * v[0]:+.2f}({scale * v[1]:.2f})"
    for r in rows:
        print(f"| {r['bond']:.3f} | {r['energy'][0]:.6f}({1e6 * r['energy'][1]:.0f}e-6) | "
              f"{fmt(r['force'])} | {fmt(r['hf'])} | {fmt(r['force_a'])} |")  # fmt: skip
    if args.reference:
        print("\n| R (bohr) | force on 2nd nucleus (mHa/bohr) | pyscf -dE/dR, QZ | 5Z "
              "| force - 5Z / error |")  # fmt: skip
        print("|---|---|---|---|---|")
        for r in rows:
            qz, fz = (1000 * reference_force(DIATOMICS[args.system], r["bond"], args.ecp, c)
                      for c in ("qz", "5z"))  # fmt: skip
            print(f"| {r['bond']:.3f} | {fmt(r['force'])} | {qz:+.2f} | {fz:+.2f} | "
                  f"{(1000 * r['force'][0] - fz) / (1000 * r['force'][1]):+.1f} |")  # fmt: skip
    print()
    print("| R (bohr) | -dE/dR, central difference (mHa/bohr) | force (mHa/bohr) | "
          "difference / combined error |")  # fmt: skip
    print("|---|---|---|---|")
    for lo, mid, hi in zip(rows, rows[1:], rows[2:], strict=False):
        span = hi["bond"] - lo["bond"]
        fd = -(hi["energy"][0] - lo["energy"][0]) / span
        fd_err = math.hypot(hi["energy"][1], lo["energy"][1]) / span
        diff = mid["force"][0] - fd
        sigma = math.hypot(fd_err, mid["force"][1])
        print(f"| {mid['bond']:.3f} | {1000 * fd:+.2f}({1000 * fd_err:.2f}) | "
              f"{fmt(mid['force'])} | {diff / sigma:+.1f} |")  # fmt: skip


if __name__ == "__main__":
    main()
