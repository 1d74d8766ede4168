"""A trained run's local energy along a line through a nucleus, one electron moved.

    python benchmarks/ecp_core_line.py RUN [--electron 2] [--atom 0] [--walker 0]

Takes one of the run's saved walkers, moves electron ``--electron`` along a fixed line
through nucleus ``--atom`` (from -1 to 1 bohr, finer within 0.25 bohr) with the other
electrons where they are, and prints the local energy and its components at each point
(``psijax.load(RUN).local_values``). An exact eigenstate's local energy is the same
everywhere; where psi has a node the kinetic energy (and an ECP's nonlocal term, a ratio
of psi's values) diverge with opposite signs on either side of it, so a divergence at a
point where the exact wavefunction has no node marks a spurious node of the network's.
"""

from __future__ import annotations

import argparse

import jax.numpy as jnp
import numpy as np

import psijax

DIRECTION = np.array([0.6, 0.48, 0.64])  # any line; this one is along no axis


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run")
    parser.add_argument("--electron", type=int, default=0)
    parser.add_argument("--atom", type=int, default=0)
    parser.add_argument("--walker", type=int, default=0)
    args = parser.parse_args()
    wf = psijax.load(args.run)
    walker = np.asarray(wf.walkers)[args.walker]
    nucleus = wf.molecule.nuclear_positions[args.atom]
    t = np.concatenate(
        [np.linspace(-1.0, -0.3, 8), np.linspace(-0.25, 0.25, 21), np.linspace(0.3, 1.0, 8)]
    )
    t = t[t != 0]  # the nucleus itself: the Coulomb and local ECP terms are infinite there
    batch = np.repeat(walker[None], t.size, axis=0)
    batch[:, args.electron] = nucleus + t[:, None] * DIRECTION / np.linalg.norm(DIRECTION)
    values = wf.local_values(jnp.asarray(batch, wf.walkers.dtype), seed=0)
    names = [k for k in ("energy", "kinetic", "electron_nucleus", "ecp_local", "ecp_nonlocal")
             if k in values]  # fmt: skip
    print(f"# {args.run}: {wf.config.system}, step {wf.step}, electron {args.electron} "
          f"through nucleus {args.atom} ({wf.molecule.symbols[args.atom]}), Ha")  # fmt: skip
    print("| t (bohr) | " + " | ".join(names) + " |")
    print("|---" * (len(names) + 1) + "|")
    for i, ti in enumerate(t):
        cells = " | ".join(f"{float(values[n][i]):.3f}" for n in names)
        print(f"| {ti:+.3f} | {cells} |")


if __name__ == "__main__":
    main()
