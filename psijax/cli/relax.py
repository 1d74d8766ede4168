"""The ``psijax relax`` command: a geometry optimisation on the forces of trained
wavefunctions (``psijax.curves.relax``)."""

from __future__ import annotations

import argparse

from psijax.cli import flags

COMMANDS = ("relax",)
EPILOG = """examples:
  psijax relax --system "H 0 0 0; H 0 0 1.0" --out runs/h2-relax
  psijax relax --system water.xyz --out runs/water-relax --max-cycles 8
  psijax relax --from runs/h2 --out runs/h2-relax    # start from a trained run
  psijax relax --system "H 0 0 0; H 0 0 1.0" --out runs/h2-relax   # again: resumes
"""


def add_parsers(sub) -> None:
    relax = sub.add_parser(
        "relax", help="a geometry optimisation: train, evaluate the forces, move the nuclei",
        description="Cycles of training (each from the wavefunction before, the nuclei "
        "moved), force evaluation with error bars and a quasi-Newton step, until the forces "
        "vanish within their error bars; writes OUT/relax.csv, OUT/trajectory.xyz, "
        "OUT/relax.png, OUT/final.xyz and a run directory per cycle.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
    )  # fmt: skip
    relax.add_argument("--config", help="TOML or JSON file of config keys (flags override it)")
    relax.add_argument("--from", dest="from_run", metavar="RUN", help="start from the trained "
                       "run RUN: its molecule, settings and wavefunction")  # fmt: skip
    relax.add_argument("--max-cycles", type=int, help="the most cycles (default 12)")
    relax.add_argument("--force-tolerance", type=float, metavar="HA_PER_BOHR",
                       help="the error bar at which zero forces are believed (default 1e-3 "
                       "Ha/bohr)")  # fmt: skip
    relax.add_argument(
        "--trust-radius",
        type=float,
        metavar="BOHR",
        help="the most a nucleus moves in one cycle (default 0.3 bohr)",
    )
    relax.add_argument(
        "--cycle-steps",
        type=int,
        help="training steps of a cycle after the "
        "first (default: a fifth of a single run's, fewer for small moves)",
    )
    flags.add_config_flags(relax)
    relax.add_argument("--force", action="store_true", help="replace a relaxation in --out")
    relax.add_argument("--quiet", action="store_true", help="no progress display")


def run(args: argparse.Namespace) -> int:
    import dataclasses

    from psijax import curves
    from psijax.curves import structure
    from psijax.curves.relax import RelaxSettings
    from psijax.rundir import train_files
    from psijax.training.job import make_config
    from psijax.training.saved import check_run

    overrides = flags.given(args)
    if args.from_run:
        base = train_files.read_config(check_run(args.from_run))
        base = dataclasses.replace(base, init_from=str(args.from_run), steps=None)
        config = make_config(base, **overrides)
    else:
        config = make_config(**overrides)
    given = {"max_cycles": args.max_cycles, "force_tolerance": args.force_tolerance,
             "trust_radius": args.trust_radius, "cycle_steps": args.cycle_steps}  # fmt: skip
    settings = RelaxSettings(**{k: v for k, v in given.items() if v is not None})
    result = curves.relax(config, config.out, settings, progress=not args.quiet,
                          force=args.force)  # fmt: skip
    print(f"{'cycle':>5} {'energy (Ha)':>16} {'largest force (Ha/bohr)':>24} {'steps':>6}")
    for c in result.cycles:
        largest, error = c.forces.largest
        print(f"{c.index:5d} {c.energy!s:>16} {largest:14.5f} +- {error:.5f} "
              f"{c.train_steps + c.eval_steps:6d}")  # fmt: skip
    if result.converged:
        print("converged   the forces are zero within their error bars (every internal "
              f"component within 2 error bars, each at most {settings.force_tolerance:g} "
              "Ha/bohr)")  # fmt: skip
    else:
        print(
            f"stopped     after {len(result.cycles)} cycles, the forces not yet zero within "
            "their error bars; the same command with a larger --max-cycles continues"
        )
    print(f"geometry    {result.out}/final.xyz: {result.molecule.atom_string()} (bohr)")
    moving = "" if result.converged else " (the last geometry; the forces have not vanished)"
    print(f"structure   {structure.describe(result.structure)}{moving}")
    print(f"energy      {result.energy} Ha at the last geometry")
    print(f"relaxation  {len(result.cycles)} cycles, {result.steps} steps, "
          f"{result.seconds:.0f} s")  # fmt: skip
    print(
        f"outputs     {result.out}/: relax.csv, trajectory.xyz, relax.png, final.xyz, "
        "cycle-NN/ (one run per cycle)"
    )
    return 0 if result.converged else 1
