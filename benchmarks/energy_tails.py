"""Where a trained run's local-energy variance comes from: its heaviest walkers.

    python benchmarks/energy_tails.py RUN [--batches 8] [--moves 20] [--top 8] [--seed 0]

Samples the run's wavefunction (``psijax.load``), ``--batches`` times ``--moves`` sampler
moves from its saved walkers, and computes every walker's local energy and components.
Prints the variance, the share of it carried by the 1% and 5% of walkers farthest from
the median, the spread training clips at (``clip_scale`` mean absolute deviations) and
how many walkers lie outside it, and for the ``--top`` farthest walkers of the last batch
each component's deviation from its median, the electron nearest to a nucleus and the
two electrons nearest to each other (same or opposite spin). A
second estimate with a different seed gives the nonlocal ECP term's quadrature noise
(the random rotation's share of the variance).
"""

from __future__ import annotations

import argparse

import numpy as np

import psijax


def _share(e: np.ndarray, fraction: float) -> float:
    """The share of sum (e - median)^2 carried by the ``fraction`` of walkers farthest out."""
    dev = np.sort((e - np.median(e)) ** 2)[::-1]
    return float(dev[: max(1, round(fraction * e.size))].sum() / dev.sum())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run")
    parser.add_argument("--batches", type=int, default=8)
    parser.add_argument("--moves", type=int, default=20)
    parser.add_argument("--top", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    wf = psijax.load(args.run)
    nuclei = wf.molecule.nuclear_positions
    clip = wf.config.clip_scale
    print(f"# local-energy tails of {args.run}: {wf.config.system}, step {wf.step}, "
          f"{wf.walkers.shape[0]} walkers, psijax {psijax.__version__}")  # fmt: skip
    print()
    print("| batch | variance (Ha^2) | top 1% share | top 5% share | clip spread (Ha) | "
          "walkers clipped | quadrature noise variance |")  # fmt: skip
    print("|---|---|---|---|---|---|---|")
    walkers = wf.walkers
    for b in range(args.batches):
        walkers = wf.sample(args.moves, seed=args.seed * 1000 + b, walkers=walkers)
        values = wf.local_values(walkers, seed=2 * b)
        v = {k: np.asarray(x, np.float64) for k, x in values.items()}
        e = v["energy"]
        median = np.median(e)
        spread = np.mean(np.abs(e - median))
        clipped = int(np.sum(np.abs(e - median) > clip * spread))
        noise = "-"
        if "ecp_nonlocal" in v:
            again = np.asarray(wf.local_values(walkers, seed=2 * b + 1)["energy"], np.float64)
            noise = f"{np.var(e - again) / 2:.2e}"
        print(f"| {b} | {e.var():.4f} | {_share(e, 0.01):.2f} | {_share(e, 0.05):.2f} | "
              f"{clip * spread:.3f} | {clipped} | {noise} |")  # fmt: skip

    names = [k for k in ("kinetic", "electron_nucleus", "electron_electron", "ecp_local",
                         "ecp_nonlocal") if k in v]  # fmt: skip
    r = np.asarray(walkers, np.float64)
    distance = np.linalg.norm(r[:, :, None, :] - nuclei[None, None], axis=-1)  # [W, n, atoms]
    n = r.shape[1]
    pairs = np.linalg.norm(r[:, :, None, :] - r[:, None, :, :], axis=-1) + np.where(
        np.eye(n, dtype=bool), np.inf, 0.0
    )  # [W, n, n], the diagonal out of reach
    up = np.arange(n) < wf.molecule.n_up
    print()
    print(f"The {args.top} walkers farthest from the median (last batch), deviations in Ha:")
    print()
    print("| E - median | " + " | ".join(names) + " | nearest electron-nucleus (bohr) | "
          "nearest electron pair (bohr) |")  # fmt: skip
    print("|---" * (len(names) + 3) + "|")
    for i in np.argsort(-np.abs(e - median))[: args.top]:
        cells = [f"{v[n][i] - np.median(v[n]):+.3f}" for n in names]
        electron, atom = np.unravel_index(np.argmin(distance[i]), distance[i].shape)
        near = f"{distance[i].min():.2f} (e{electron}, {wf.molecule.symbols[atom]})"
        a, b = np.unravel_index(np.argmin(pairs[i]), pairs[i].shape)
        spins = "same spin" if up[a] == up[b] else "opposite spins"
        pair = f"{pairs[i].min():.3f} (e{min(a, b)}, e{max(a, b)}: {spins})" if n > 1 else "-"
        print(f"| {e[i] - median:+.3f} | " + " | ".join(cells) + f" | {near} | {pair} |")


if __name__ == "__main__":
    main()
