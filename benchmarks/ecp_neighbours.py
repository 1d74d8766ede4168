"""How many electrons sit inside an ECP's cutoff sphere: the counts behind ``neighbours``.

    python benchmarks/ecp_neighbours.py [--molecules Cl2 NaCl CO2 C2H4 SiH4 C6H6]
                                        [--walkers 1024] [--steps 300]

The nonlocal ECP term moves only the K electrons nearest each ECP nucleus onto its
quadrature sphere (``psijax.hamiltonian.ecp``): exact while no more than K electrons are
inside the nucleus' cutoff radius. This samples each molecule's Hartree-Fock determinant
(pyscf UHF, ccECP with ccecp-cc-pvdz; Metropolis, float64; the first third of the steps
discarded) and counts, every 5 steps and for every walker and ECP nucleus, the electrons
inside the cutoff: their mean, the largest count seen, and how many samples had more than
K (the default for that molecule). Geometries in bohr (experimental equilibria).
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from ecp_hartree_fock import determinant  # noqa: E402
from molecule_scale import atom_string  # noqa: E402

import psijax  # noqa: E402
from psijax import sampling, system  # noqa: E402
from psijax.hamiltonian import ecp as ecp_terms  # noqa: E402
from psijax.system import scf  # noqa: E402

MOLECULES = {
    "Cl2": "Cl 0 0 0; Cl 0 0 3.7566",
    "NaCl": "Na 0 0 0; Cl 0 0 4.461",
    "CO2": "C 0 0 0; O 0 0 2.196; O 0 0 -2.196",
    "C2H4": "C 0 0 1.2651; C 0 0 -1.2651; H 0 1.7435 2.3430; H 0 -1.7435 2.3430; "
    "H 0 1.7435 -2.3430; H 0 -1.7435 -2.3430",
    "SiH4": "Si 0 0 0; H 1.6137 1.6137 1.6137; H -1.6137 -1.6137 1.6137; "
    "H -1.6137 1.6137 -1.6137; H 1.6137 -1.6137 -1.6137",
    "C6H6": atom_string("C6H6"),
}


def counts(name: str, args) -> dict:
    molecule = system.resolve(MOLECULES[name], ecp="ccecp")
    term = ecp_terms.EcpNonlocal.of(molecule)
    psi = determinant(scf.hartree_fock(molecule, basis="ccecp-cc-pvdz"))
    log_density = jax.jit(jax.vmap(lambda r: 2 * psi.log_abs(None, r)))
    key = jax.random.PRNGKey(args.seed)
    walkers = sampling.init_walkers(key, molecule, args.walkers).astype(jnp.float64)
    logp, width, seen = log_density(walkers), 0.3, []
    for step in range(args.steps):
        key, k1, k2 = jax.random.split(key, 3)
        proposal = walkers + width * jax.random.normal(k1, walkers.shape, walkers.dtype)
        logq = log_density(proposal)
        accept = jnp.log(jax.random.uniform(k2, logp.shape, walkers.dtype)) < logq - logp
        walkers = jnp.where(accept[:, None, None], proposal, walkers)
        logp = jnp.where(accept, logq, logp)
        width *= 1.05 if float(accept.mean()) > 0.5 else 0.95
        if step >= args.steps // 3 and step % 5 == 0:
            r = np.asarray(walkers)[:, None]  # [W, 1, N, 3]
            distance = np.linalg.norm(r - term.centers[None, :, None], axis=-1)  # [W, A, N]
            seen.append(np.sum(distance < term.cutoffs[None, :, None], axis=-1))
    inside = np.concatenate(seen)  # [samples, A]
    return dict(
        name=name, n=molecule.n_electrons, k=term.neighbours, centers=inside.shape[1],
        cutoffs=sorted(set(np.round(term.cutoffs, 2))), mean=float(inside.mean()),
        largest=int(inside.max()), samples=inside.size, over=int(np.sum(inside > term.neighbours)),
    )  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--molecules", nargs="+", default=list(MOLECULES), choices=MOLECULES)
    parser.add_argument("--walkers", type=int, default=1024)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    print(f"# Electrons inside the ECP cutoff spheres, {time.strftime('%Y-%m-%d')}")
    print(f"- python {platform.python_version()}, jax {jax.__version__}, float64, "
          f"{args.walkers} walkers x {args.steps} steps\n")  # fmt: skip
    print("| molecule | valence electrons N | ECP nuclei | cutoff (bohr) | moved K | mean inside "
          "| largest inside | samples | samples with more than K |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|")
    for name in args.molecules:
        c = counts(name, args)
        print(f"| {c['name']} | {c['n']} | {c['centers']} | {', '.join(map(str, c['cutoffs']))} "
              f"| {c['k']} | {c['mean']:.2f} | {c['largest']} | {c['samples']} | {c['over']} |",
              flush=True)  # fmt: skip


if __name__ == "__main__":
    psijax.configure()  # the process-wide set-up psijax's own jobs do
    main()
