"""A softened electron-nucleus distance at ECP nuclei: LiH with ccECP (two electrons).

    python benchmarks/ecp_soft_core.py [--soft 0.2] [--bond 3.2] [--seed 0]
                                       [--steps 1000] [--eval-steps 2000] [--out DIR]
                                       [--system "C 0 0 0" --spin 2]

An ECP is finite at its nucleus, so the valence wavefunction is smooth there, while
|r - R| in the networks' features and envelopes has a kink at R. This trains the default
job with the distances to ECP nuclei softened to sqrt(|r - R|^2 + a^2) (``--soft a``, the
``ecp_soft_core`` setting; 0: plain |r - R|) for ``--steps`` steps, evaluates it and
prints the energy against pyscf's CCSD in ccecp-cc-pV5Z / cc-pV5Z with the same ECP (full
CI for two electrons). ``--system`` trains another molecule instead (no reference).
"""

from __future__ import annotations

import argparse
import json

import psijax


def reference(bond: float) -> float:
    from pyscf import cc, gto, scf

    mol = gto.M(
        atom=f"Li 0 0 0; H 0 0 {bond}", unit="bohr", verbose=0, ecp={"Li": "ccecp"},
        basis={"Li": "ccecp-cc-pv5z", "H": "cc-pv5z"},
    )  # fmt: skip
    return float(cc.CCSD(scf.RHF(mol).run()).run().e_tot)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--soft", type=float, default=0.2)
    parser.add_argument("--bond", type=float, default=3.2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--eval-steps", type=int, default=2000)
    parser.add_argument("--out", default="runs/ecp_soft_core")
    parser.add_argument("--system", default=None)
    parser.add_argument("--spin", type=int, default=None)
    args = parser.parse_args()
    out = f"{args.out}/soft{args.soft}_seed{args.seed}"
    system = args.system or f"Li 0 0 0; H 0 0 {args.bond}"
    psijax.train(system=system, spin=args.spin, ecp="ccecp", ecp_soft_core=args.soft,
                 steps=args.steps, seed=args.seed, out=out, progress=False, force=True)  # fmt: skip
    psijax.evaluate(out, steps=args.eval_steps, observables=("energy",), progress=False)
    with open(f"{out}/eval/summary.json") as f:
        energy = json.load(f)["estimates"]["energy"]
    mean, error = energy["mean"], energy["error"]
    if args.system:
        print(f"| {args.soft} | {args.seed} | {mean:.6f}({1e6 * error:.0f}e-6) |")
        return
    exact = reference(args.bond)
    print(f"| {args.soft} | {args.seed} | {mean:.6f}({1e6 * error:.0f}e-6) | {exact:.6f} "
          f"| {1e3 * (mean - exact):+.2f}({1e3 * error:.2f}) mHa |")  # fmt: skip


if __name__ == "__main__":
    main()
