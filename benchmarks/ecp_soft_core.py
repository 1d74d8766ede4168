"""A softened electron-nucleus distance at ECP nuclei: LiH with ccECP (two electrons).

    python benchmarks/ecp_soft_core.py [--soft 0.2] [--bond 3.2] [--seed 0]
                                       [--steps 1000] [--eval-steps 2000] [--out DIR]

An ECP is finite at its nucleus, so the valence wavefunction is smooth there, while the
networks' features and envelopes use |r - R|, whose kink at R the network must learn to
cancel. This experiment replaces |r - R| by sqrt(|r - R|^2 + a^2) for the ECP atom (Li,
the first atom) in the features and envelopes (``--soft a``; 0: psijax as it is), trains
the default job for ``--steps`` steps, evaluates it and prints the energy against pyscf's
CCSD in ccecp-cc-pV5Z / cc-pV5Z with the same ECP (full CI for two electrons).
"""

from __future__ import annotations

import argparse
import json

import jax.numpy as jnp

import psijax
from psijax.ansatz import features


def soften(a: float) -> None:
    """Patch the features so that the first nucleus' distances are softened by ``a`` bohr."""

    def electron_nucleus(r, nuclei):
        n = r.shape[0]
        ae = r[:, None, :] - nuclei[None, :, :]
        soft = jnp.asarray([a] + [0.0] * (nuclei.shape[0] - 1), r.dtype)[None, :, None]
        r_ae = jnp.sqrt(jnp.sum(ae * ae, axis=-1, keepdims=True) + soft**2)
        scale = jnp.log1p(r_ae) / r_ae
        h1 = jnp.concatenate([ae * scale, r_ae * scale], axis=-1).reshape(n, -1)
        return h1, r_ae[..., 0]

    features.electron_nucleus = electron_nucleus


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
    args = parser.parse_args()
    if args.soft > 0:
        soften(args.soft)
    out = f"{args.out}/soft{args.soft}_seed{args.seed}"
    psijax.train(system=f"Li 0 0 0; H 0 0 {args.bond}", ecp="ccecp", steps=args.steps,
                 seed=args.seed, out=out, progress=False, force=True)  # fmt: skip
    psijax.evaluate(out, steps=args.eval_steps, observables=("energy",), progress=False)
    with open(f"{out}/eval/summary.json") as f:
        energy = json.load(f)["estimates"]["energy"]
    exact = reference(args.bond)
    mean, error = energy["mean"], energy["error"]
    print(f"| {args.soft} | {args.seed} | {mean:.6f}({1e6 * error:.0f}e-6) | {exact:.6f} "
          f"| {1e3 * (mean - exact):+.2f}({1e3 * error:.2f}) mHa |")  # fmt: skip


if __name__ == "__main__":
    main()
