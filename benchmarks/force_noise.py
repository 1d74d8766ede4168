"""Where a trained run's force noise comes from, and what the space warp costs, in one go.

    python benchmarks/force_noise.py RUN [--batches 12] [--sweeps 10]

Samples RUN's wavefunction (``psijax.load``: its saved walkers, ``--sweeps`` sampler steps
between batches) and evaluates the forces' per-walker values on every batch twice, with and
without the space-warp estimator on the ECP nuclei (``Forces.warp``), alternating, on the same
walkers and keys. Prints per nucleus and component the per-walker spread (standard deviation
and the 99th percentile of the absolute deviation from the median, Ha/bohr) of the
Hellmann-Feynman part, the Pulay part, the direct total (``force_*``), the space-warp total
and their least-variance combination (``forces.control_variate``); where the Pulay parts'
variance comes from (the local energy's largest outliers and their distance to the node,
the walkers with an electron near an ECP nucleus); then the spread of the internal
components (rigid translations and rotations projected out orthogonally) with and without
the combination, and the median seconds of a batch with and without the warp.
"""

from __future__ import annotations

import argparse
import dataclasses
import platform
import sys
import time
from pathlib import Path

import jax
import numpy as np

import psijax
from psijax import hamiltonian
from psijax.curves import geometry
from psijax.estimators import forces as forces_lib
from psijax.estimators import observables
from psijax.parallel import map_walkers

sys.path.insert(0, str(Path(__file__).parent))
from vmc_step import _cpu_name

CORE_RADIUS = 0.3  # bohr: walkers with an electron this near an ECP nucleus (_tails)


def _spread(x: np.ndarray) -> str:
    tail = np.percentile(np.abs(x - np.median(x)), 99)
    return f"{x.std():8.2f} {tail:8.1f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("run")
    parser.add_argument("--batches", type=int, default=12)
    parser.add_argument("--sweeps", type=int, default=10)
    args = parser.parse_args()
    wf = psijax.load(args.run)
    molecule = wf.molecule
    energy = hamiltonian.for_config(molecule, wf.config)
    with_warp = forces_lib.from_config(molecule, wf.network)
    without = dataclasses.replace(with_warp, warp=False)

    def batch_fn(observed):
        local = observables.local_values(energy, wf.network, (observed,))
        one = lambda p, walker_key: local(p, *walker_key)
        return jax.jit(lambda p, r, k: map_walkers(one, p, (r, k)))

    fns = {"warp": batch_fn(with_warp), "direct": batch_fn(without)}
    # per walker: the distance of its nearest electron to an ECP nucleus, and its distance
    # to the node to first order, 1 / |grad log|psi|| (over all electrons)
    cores = np.asarray(molecule.nuclear_positions)[[e is not None for e in molecule.ecp]]
    grad = jax.jit(jax.vmap(jax.grad(lambda r: wf.network.log_abs(wf.params, r))))
    near_core, node = [], []
    walkers, rows, seconds = wf.walkers, [], {k: [] for k in fns}
    for b in range(args.batches):
        walkers = wf.sample(args.sweeps, seed=1000 + b, walkers=walkers)
        r = np.asarray(walkers, np.float64)
        node.append(1.0 / np.linalg.norm(np.asarray(grad(walkers)).reshape(len(r), -1), axis=1))
        if len(cores):
            near_core.append(np.linalg.norm(r[:, :, None] - cores, axis=-1).min(axis=(1, 2)))
        keys = jax.random.split(jax.random.PRNGKey(b), walkers.shape[0])
        for name, fn in fns.items():
            started = time.perf_counter()
            out = jax.block_until_ready(fn(wf.params, walkers, keys))
            if b:  # the first batch compiles
                seconds[name].append(time.perf_counter() - started)
            if name == "warp":
                rows.append({k: np.asarray(v, np.float64) for k, v in out.items()})
    v = {k: np.concatenate([r[k] for r in rows]) for k in rows[0]}
    e = v["energy"] - v["energy"].mean()
    print(f"# {args.run}: {molecule.n_electrons} electrons, {len(e)} walker samples; "
          f"psijax {psijax.__version__}, jax {jax.__version__}, python "
          f"{platform.python_version()}, {_cpu_name()}")  # fmt: skip
    n_atoms = molecule.n_atoms
    # per walker and component: the Pulay part, -2 (E_L - E) (dlog|psi| - its mean)
    pulay_parts = {
        (a, c): -2 * e * (v[f"_dlog_{a}_{c}"] - v[f"_dlog_{a}_{c}"].mean())
        for a in range(n_atoms) for c in "xyz"
    }  # fmt: skip
    totals = {k: np.zeros((len(e), n_atoms, 3)) for k in ("direct", "combined")}
    print("| nucleus | HF part | Pulay part | direct total | warp total | combined | weight |")
    print("|---|---|---|---|---|---|---|")
    for a, symbol in enumerate(molecule.symbols):
        for c in "xyz":
            pulay = pulay_parts[a, c]
            direct = v[f"force_hf_{a}_{c}"] + pulay
            totals["direct"][:, a, "xyz".index(c)] = direct
            totals["combined"][:, a, "xyz".index(c)] = direct
            cells = [_spread(v[f"force_hf_{a}_{c}"]), _spread(pulay), _spread(direct)]
            if f"_warp_de_{a}_{c}" in v:
                w = v[f"_warp_dlog_{a}_{c}"]
                warp = -v[f"_warp_de_{a}_{c}"] - 2 * e * (w - w.mean())
                combined, weight = forces_lib.control_variate(direct, warp)
                totals["combined"][:, a, "xyz".index(c)] = combined
                cells += [_spread(warp), _spread(combined), f"{weight:.2f}"]
            else:
                cells += ["-", "-", "-"]
            print(f"| {symbol}{a + 1} {c} | " + " | ".join(cells) + " |")
    near = np.concatenate(near_core) if near_core else None
    _tails(pulay_parts, e, np.concatenate(node), near, molecule.symbols)
    # the internal components (rigid motions projected out orthogonally), walker by walker
    projector = geometry.projector(molecule.nuclear_positions)
    spread = {k: np.std(t.reshape(len(e), -1) @ projector, axis=0) for k, t in totals.items()}
    inside = spread["direct"] > 1e-9 * spread["direct"].max()
    print(f"\nthe internal force components' per-walker spread: direct "
          f"{spread['direct'][inside].min():.2f}-{spread['direct'][inside].max():.2f}, "
          f"combined {spread['combined'][inside].min():.2f}-"
          f"{spread['combined'][inside].max():.2f} Ha/bohr")  # fmt: skip
    med = {k: float(np.median(s)) for k, s in seconds.items()}
    print(f"\nseconds per batch of {walkers.shape[0]} walkers (median of {len(seconds['warp'])}):"
          f" with the warp {med['warp']:.2f}, without {med['direct']:.2f}, "
          f"ratio {med['warp'] / med['direct']:.2f}")  # fmt: skip


def _tails(pulay_parts: dict, e: np.ndarray, node: np.ndarray, near_core, symbols) -> None:
    """Where the Pulay parts' variance comes from: the walkers with the largest local
    energies, whether they sit near a node, and the walkers with an electron within
    ``CORE_RADIUS`` of an ECP nucleus."""
    top = np.argsort(-np.abs(e))[: max(1, len(e) // 200)]
    print(f"\nthe 0.5% of walkers farthest from the mean local energy: {_share(e, top):.2f} of its"
          f" variance; their distance to the node 1/|grad log|psi||"
          f" {np.percentile(node[top], 10):.3f}-{np.percentile(node[top], 90):.3f} bohr"
          f" (10th-90th percentile; all walkers' median {np.median(node):.3f})")  # fmt: skip
    if near_core is None:
        return
    near = near_core < CORE_RADIUS
    print(
        f"walkers with an electron within {CORE_RADIUS} bohr of an ECP nucleus: "
        f"{100 * near.mean():.1f}%, {_share(e, near):.2f} of the local energy's variance"
    )
    print("| nucleus | their share of the Pulay part's variance | spread | without them |")
    print("|---|---|---|---|")
    for (a, c), pulay in pulay_parts.items():
        print(
            f"| {symbols[a]}{a + 1} {c} | {_share(pulay - pulay.mean(), near):.2f} | "
            f"{pulay.std():.2f} | "
            f"{pulay[~near].std():.2f} |"
        )


def _share(x: np.ndarray, which) -> float:
    """The share of sum(x^2) from the walkers ``which`` (indices or a mask)."""
    return float(np.sum(x[which] ** 2) / np.sum(x**2))


if __name__ == "__main__":
    main()
