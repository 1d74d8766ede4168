"""The ``psijax twists`` command: the electron gas trained at each twist of a grid, its
energies averaged (``psijax.curves.twists``)."""

from __future__ import annotations

import argparse

from psijax.cli import flags

COMMANDS = ("twists",)
EPILOG = """examples:
  psijax twists --system heg --electrons 14 --rs 5 --twist-grid 3 --out runs/heg-tabc
  psijax twists --system heg --electrons 14 --rs 5 --twist-grid 3 --out runs/heg-tabc  # resumes
  psijax twists --system heg --electrons 14 --rs 5 --twists "0.1 0.2 0.3; -0.4 0.1 0" --out runs/t2
"""


def add_parsers(sub) -> None:
    twists = sub.add_parser(
        "twists", help="the electron gas at each twist of a grid, its energies averaged",
        description="Train the electron gas at each twist of a Monkhorst-Pack grid (the "
        "twists the cube's symmetries make equivalent trained once, weighted by their "
        "number), then average; writes OUT/twists.csv, OUT/summary.json and a run "
        "directory per twist.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
    )  # fmt: skip
    twists.add_argument("--config", help="TOML or JSON file of config keys (flags override it)")
    given = twists.add_mutually_exclusive_group()
    given.add_argument("--twist-grid", type=int, default=2, metavar="M",
                       help="twists a side of the grid (default 2: 8 twists, one class; "
                       "3: 27 twists, 4 classes)")  # fmt: skip
    given.add_argument("--twists", metavar="LIST", help="the twists one by one, each of "
                       "weight 1: 't1 t2 t3; t1 t2 t3; ...'")  # fmt: skip
    flags.add_config_flags(twists)
    twists.add_argument("--force", action="store_true", help="replace an average in --out")
    twists.add_argument("--quiet", action="store_true", help="no progress display")


def run(args: argparse.Namespace) -> int:
    from psijax.curves.twists import twist_average
    from psijax.statistics import Estimate
    from psijax.training.job import make_config

    value = lambda mean, error: str(Estimate(mean, error, 0, 1, 0, 0.0))

    config = make_config(**flags.given(args))
    which = args.twists if args.twists is not None else args.twist_grid
    result = twist_average(config, which, config.out, progress=not args.quiet,
                           force=args.force)  # fmt: skip
    print(f"{'twist':>26} {'weight':>6} {'energy (Ha)':>16} {'Hartree-Fock':>13} {'steps':>6}")
    for t in result.twists:
        shown = "(" + ", ".join(f"{c:.4f}" for c in t.twist) + ")"
        print(f"{shown:>26} {t.weight:6d} {value(t.energy, t.error):>16} "
              f"{t.hartree_fock:13.6f} {t.steps:6d}")  # fmt: skip
    energy, error = result.energy
    n = result.electrons
    print(f"average     {value(energy, error)} Ha per cell, {value(energy / n, error / n)} Ha "
          f"per electron (Hartree-Fock {result.hartree_fock:.6f})")  # fmt: skip
    print(f"outputs     {result.out}/: twists.csv, summary.json, twist-NN/ (one run per twist)")
    return 0
