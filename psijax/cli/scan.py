"""The ``psijax scan`` command: an energy curve along a bond or over the frames of an
.xyz file (``psijax.curves.scan``)."""

from __future__ import annotations

import argparse

from psijax.cli import flags
from psijax.errors import InputError

COMMANDS = ("scan",)
EPILOG = """examples:
  psijax scan --system LiH --bond 1-2 --lengths 2.5:4.5:9 --out runs/lih-scan
  psijax scan --system path.xyz --frames --out runs/path     # every frame of path.xyz
  psijax scan --system LiH --bond 1-2 --lengths 2.5:4.5:9 --out runs/lih-scan  # again: resumes
"""


def add_parsers(sub) -> None:
    scan = sub.add_parser(
        "scan", help="an energy curve: a bond stretched, or the frames of an .xyz file",
        description="Train at each geometry in order, each point started from the one "
        "before (its wavefunction, the nuclei moved) and ended by a convergence rule; "
        "writes OUT/scan.csv, OUT/scan.png and a run directory per point.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
    )  # fmt: skip
    scan.add_argument("--config", help="TOML or JSON file of config keys (flags override it)")
    scan.add_argument("--bond", metavar="I-J", help="the atom pair whose distance the scan "
                      "sets: atom numbers from 1 in --system's order; atom J moves")  # fmt: skip
    scan.add_argument("--lengths", metavar="RANGE", help="the distances, in --unit: "
                      "START:STOP:COUNT or a comma-separated list")  # fmt: skip
    scan.add_argument(
        "--frames", action="store_true", help="the frames of the .xyz file --system names"
    )
    flags.add_config_flags(scan)
    scan.add_argument("--force", action="store_true", help="replace a scan in --out")
    scan.add_argument("--quiet", action="store_true", help="no progress display")


def run(args: argparse.Namespace) -> int:
    from psijax import curves, system
    from psijax.curves.scan import FRAMES
    from psijax.training.job import make_config

    overrides = flags.given(args)
    config = make_config(**overrides)
    if args.frames == bool(args.bond or args.lengths):
        raise InputError(
            "give either --bond I-J with --lengths, or --frames with a multi-frame .xyz --system"
        )
    if args.frames:
        points = curves.frames(config.system, charge=config.charge or 0, spin=config.spin)
        label = FRAMES
    else:
        if not (args.bond and args.lengths):
            raise InputError("--bond and --lengths go together; give both, e.g. --bond 1-2 "
                             "--lengths 2.5:4.5:9")  # fmt: skip
        molecule = system.for_config(config)
        lengths = curves.points.parse_lengths(args.lengths)
        points = curves.along_bond(molecule, args.bond, lengths, config.unit)
        label = f"bond {args.bond} ({config.unit})"
    result = curves.scan(config, points, config.out, label=label, progress=not args.quiet,
                         force=args.force)  # fmt: skip
    print(f"{'coordinate':>12} {'energy (Ha)':>16} {'steps':>6}")
    for p in result.points:
        print(f"{p.coordinate:12.4f} {p.energy!s:>16} {p.steps:6d}")
    fit = result.fit
    if fit is not None:
        how = ("a Morse curve fitted to every point" if fit.model == "morse"
               else "a polynomial fitted near the lowest point")  # fmt: skip
        print(f"minimum     {fit.at:.4f} ({label}), {fit.energy:.6f} Ha ({how})")
    print(f"scan        {len(result.points)} points, {result.steps} steps, "
          f"{result.seconds:.0f} s of training")  # fmt: skip
    print(f"outputs     {result.out}/: scan.csv, scan.png, point-NN/ (one run per point)")
    return 0
