"""VMC of pyscf's own Hartree-Fock determinant with an ECP: psijax's energy against pyscf's.

    python benchmarks/ecp_hartree_fock.py [--atoms "C 0 0 0:2" "Ga 0 0 0:1"] [--ecp ccecp]
                                          [--walkers 2048] [--steps 400] [--quadrature 12]

For each atom (``"ATOMS:SPIN"``), pyscf's UHF with the ECP and its valence basis
(``ccecp-cc-pvdz``) gives a Slater determinant psi = det(up) det(down) of its occupied
orbitals; psijax samples |psi|^2 (Metropolis, float64) and averages its local energy with
psijax's Hamiltonian (kinetic, Coulomb with the effective charges, the ECP's local part and
its nonlocal part by randomly rotated quadrature). No network: the expectation must equal
pyscf's Hartree-Fock energy exactly, so any difference beyond the error bar (blocking
analysis over the steps) is an error in psijax's terms. Also printed: each component's
mean, and pyscf's <V_ECP> = tr(D V_ECP) against psijax's ECP components.
"""

from __future__ import annotations

import argparse
import os
import platform
import time

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import psijax  # noqa: E402
from psijax import hamiltonian, laplacian, sampling, system  # noqa: E402
from psijax.config import Config  # noqa: E402
from psijax.statistics import blocking_estimate  # noqa: E402
from psijax.system import scf  # noqa: E402
from psijax.types import Psi  # noqa: E402


def determinant(hf):
    orbitals = scf.hf_orbitals(hf)

    def apply(params, r):
        up, down = orbitals(r[None])
        s_up, l_up = jnp.linalg.slogdet(up[0])
        s_down, l_down = jnp.linalg.slogdet(down[0]) if hf.n_down else (1.0, 0.0)
        return Psi(s_up * s_down, l_up + l_down)

    return hamiltonian.PsiFunctions(lambda p, r: apply(p, r).log_abs, apply)


def run(atoms: str, spin: int, args) -> dict:
    molecule = system.resolve(atoms, spin=spin, ecp=args.ecp)
    hf = scf.hartree_fock(molecule)
    psi = determinant(hf)
    config = Config(ecp=args.ecp, ecp_quadrature=args.quadrature)
    local = hamiltonian.for_config(molecule, config, laplacian.Forward()).local_energy(psi)
    log_density = jax.vmap(lambda r: 2 * psi.log_abs(None, r))

    @jax.jit
    def moves(key, walkers, logp, width):
        def move(_, carry):
            key, walkers, logp, accepted = carry
            key, k1, k2 = jax.random.split(key, 3)
            proposal = walkers + width * jax.random.normal(k1, walkers.shape, walkers.dtype)
            logq = log_density(proposal)
            accept = jnp.log(jax.random.uniform(k2, logp.shape, walkers.dtype)) < logq - logp
            walkers = jnp.where(accept[:, None, None], proposal, walkers)
            return key, walkers, jnp.where(accept, logq, logp), accepted + accept.mean()

        return jax.lax.fori_loop(0, 10, move, (key, walkers, logp, 0.0))

    @jax.jit
    def parts(key, walkers):
        keys = jax.random.split(key, walkers.shape[0])
        values = jax.vmap(lambda r, k: local.parts(None, r, k))(walkers, keys)
        return {name: jnp.mean(v) for name, v in values.items()}

    key = jax.random.PRNGKey(args.seed)
    walkers = sampling.init_walkers(key, molecule, args.walkers).astype(jnp.float64)
    logp, width = log_density(walkers), 0.3
    for _ in range(args.burn_in):
        key, walkers, logp, accepted = moves(key, walkers, logp, width)
        width *= 1.1 if accepted / 10 > 0.5 else 0.9
    rows, started = [], time.perf_counter()
    for _ in range(args.steps):
        key, walkers, logp, _ = moves(key, walkers, logp, width)
        key, sub = jax.random.split(key)
        rows.append({k: float(v) for k, v in parts(sub, walkers).items()})
    seconds = time.perf_counter() - started
    series = {name: np.array([r[name] for r in rows]) for name in rows[0]}
    energy = blocking_estimate(series["energy"])
    ecp_total = blocking_estimate(series["ecp_local"] + series["ecp_nonlocal"])
    dm = [c @ c.T for c in (hf.coeff_up, hf.coeff_down)]
    v_ecp = sum(np.einsum("ij,ji", d, hf.mol.intor("ECPscalar")) for d in dm)
    ecp = molecule.ecp[0]
    return dict(
        atoms=atoms, valence=molecule.n_electrons,
        max_l=max(c[0] for c in _channels(ecp, molecule)),
        hf=hf.energy, energy=energy, diff=energy.mean - hf.energy, v_ecp=v_ecp, ecp=ecp_total,
        means={k: float(v.mean()) for k, v in series.items()}, seconds=seconds, width=width,
    )  # fmt: skip


def _channels(name, molecule):
    from psijax.system import ecp

    return ecp.load(name, molecule.symbols[0]).channels


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--atoms", nargs="+", default=["C 0 0 0:2", "Cl 0 0 0:1", "Ga 0 0 0:1"])
    parser.add_argument("--ecp", default="ccecp")
    parser.add_argument("--walkers", type=int, default=2048)
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--burn-in", type=int, default=100)
    parser.add_argument("--quadrature", type=int, default=12)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    print(f"# VMC of pyscf's Hartree-Fock determinant with ECP {args.ecp}")
    print(f"- python {platform.python_version()}, jax {jax.__version__}, float64")
    print(f"- {platform.processor() or platform.machine()}, {os.cpu_count()} cores, load "
          f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}")  # fmt: skip
    print(f"- {args.walkers} walkers, {args.steps} steps of 10 moves after {args.burn_in}, "
          f"{args.quadrature}-point quadrature, seed {args.seed}")  # fmt: skip
    print()
    print(
        "| atom | valence e | projectors up to l | pyscf HF (Ha) | psijax VMC (Ha) | "
        "difference (mHa) | in error bars | pyscf <V_ECP> | psijax <V_ECP> | seconds |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for item in args.atoms:
        atoms, spin = item.rsplit(":", 1)
        r = run(atoms, int(spin), args)
        e = r["energy"]
        energy = f"{e.mean:.6f}({e.error * 1e6:.0f})"
        v_ecp = f"{r['ecp'].mean:.5f}({r['ecp'].error * 1e5:.0f})"
        print(f"| {atoms} | {r['valence']} | {r['max_l']} | {r['hf']:.6f} | {energy} | "
              f"{r['diff'] * 1e3:+.3f} | {abs(r['diff']) / e.error:.1f} | {r['v_ecp']:.5f} | "
              f"{v_ecp} | {r['seconds']:.0f} |", flush=True)  # fmt: skip


if __name__ == "__main__":
    psijax.configure()  # the process-wide set-up psijax's own jobs do
    main()
