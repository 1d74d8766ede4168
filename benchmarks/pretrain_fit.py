"""Pretraining with the head fitted to a part of the walkers against all of them.

    python benchmarks/pretrain_fit.py [--atoms "Al 0 0 0:1:ccecp" "C 0 0 0:2"]
                                      [--walkers 1024] [--fits 256 1024] [--steps 500]

Each atom (``"ATOMS:SPIN[:ECP]"``) is pretrained on its Hartree-Fock orbitals as a run
does (the default network, the walkers of a fresh run, pretraining's sampler), with the
head's least-squares fit seeing the first F walkers for each F of ``--fits`` (the loss
and its gradient always see every walker), for ``--steps`` steps, same seed. Printed per
fit: the loss's smallest and largest value over windows of 100 steps; a loss that stalls
or jumps where the other falls is the fit's head failing on the walkers it did not see.
"""

from __future__ import annotations

import argparse
import platform
import time

import jax
import jax.numpy as jnp
import numpy as np

import psijax
from psijax import registry, sampling, system
from psijax.config import Config
from psijax.system import scf
from psijax.training import pretrain

WINDOW = 100


def losses_for(atoms: str, spin: int, ecp: str | None, walkers: int, fit: int, steps: int):
    config = Config(ecp=ecp, walkers=walkers)
    molecule = system.resolve(atoms, spin=spin, ecp=ecp)
    net = registry.ansatz(molecule, config)
    keys = jax.random.split(jax.random.PRNGKey(0), 5)
    params = net.init(keys[0], jnp.float32)
    initial = sampling.init_walkers(keys[1], molecule, walkers)
    saved = pretrain.fit_walkers_for
    pretrain.fit_walkers_for = lambda _: fit
    try:
        t0 = time.perf_counter()
        _, _, losses = pretrain.pretrain(
            keys[2], net, params, molecule, initial, steps=steps,
            hf=scf.hartree_fock(molecule), sampler=pretrain.sampler_of(config, molecule),
        )  # fmt: skip
        return np.asarray(losses), time.perf_counter() - t0
    finally:
        pretrain.fit_walkers_for = saved


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--atoms", nargs="+", default=["Al 0 0 0:1:ccecp", "C 0 0 0:2"])
    parser.add_argument("--walkers", type=int, default=1024)
    parser.add_argument("--fits", type=int, nargs="+", default=[256, 1024])
    parser.add_argument("--steps", type=int, default=500)
    args = parser.parse_args()
    psijax.configure()
    machine = platform.processor() or platform.machine()
    print(
        f"# psijax {psijax.__version__}, jax {jax.__version__}, {machine}, "
        f"{args.walkers} walkers, {args.steps} pretraining steps"
    )
    windows = range(0, args.steps, WINDOW)
    head = " | ".join(f"steps {w}-{w + WINDOW}" for w in windows)
    print(f"| atom | fit walkers | {head} | seconds |")
    print("|---|---|" + "---|" * len(windows) + "---|")
    for spec in args.atoms:
        atoms, spin, *rest = spec.split(":")
        for fit in args.fits:
            losses, seconds = losses_for(
                atoms, int(spin), rest[0] if rest else None, args.walkers, fit, args.steps
            )
            cells = " | ".join(
                f"{losses[w : w + WINDOW].min():.2g} - {losses[w : w + WINDOW].max():.2g}"
                for w in windows
            )
            name = atoms.split()[0] + (f" ({rest[0]})" if rest else "")
            print(f"| {name} | {fit} | {cells} | {seconds:.0f} |", flush=True)


if __name__ == "__main__":
    main()
