"""The ``psijax`` command. Maps user strings to objects once, then calls ``psijax.training.job``."""

from __future__ import annotations

import argparse
import shlex
import sys

from psijax.cli import evaluate, flags, relax, scan, twists
from psijax.errors import InputError, Interrupted, PsijaxError, TrainingError
from psijax.runtime import configure


class _Parser(argparse.ArgumentParser):
    """argparse that reports a bad flag as one psijax error line instead of usage + exit."""

    def error(self, message: str):
        raise InputError(f"{message}; see '{self.prog} --help'")


DESCRIPTION = (
    "Train neural-network wavefunctions (FermiNet, PsiFormer) for atoms and molecules by "
    "variational Monte Carlo, on one CPU or many devices."
)
TRAIN_EPILOG = """examples:
  psijax train --system H2 --steps 2000 --out runs/h2
  psijax train --system "Li 0 0 0; H 0 0 3.015" --layers 32x8,32x8 --dry-run
  psijax train --resume runs/h2 --steps 4000      # continue a run further
"""


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    def of(name: str) -> str:
        try:
            return version(name)
        except PackageNotFoundError:
            return "not installed"

    return f"psijax {of('psijax')} (jax {of('jax')}, folx {of('folx')})"


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="psijax", description=DESCRIPTION)
    parser.add_argument("--version", action="version", version=_version())
    sub = parser.add_subparsers(dest="command", required=True)
    train = sub.add_parser(
        "train", help="train a wavefunction and report the energy", description=DESCRIPTION,
        epilog=TRAIN_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
    )  # fmt: skip
    train.add_argument("--version", action="version", version=_version())
    train.add_argument("--config", help="TOML or JSON file of config keys (flags override it)")
    train.add_argument(
        "--dry-run", action="store_true",
        help="check everything and print the resolved config, the job's size and the "
        "Hartree-Fock energy; write nothing",
    )  # fmt: skip
    flags.add_config_flags(train)
    flags.add_distributed_flags(train)
    train.add_argument("--resume", metavar="DIR", help="continue the run in DIR")
    train.add_argument("--force", action="store_true", help="overwrite a run in --out")
    train.add_argument("--quiet", action="store_true", help="no progress display")
    evaluate.add_parsers(sub)
    scan.add_parsers(sub)
    relax.add_parsers(sub)
    twists.add_parsers(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        configure()
        if args.command in evaluate.COMMANDS:
            return evaluate.run(args)
        if args.command in scan.COMMANDS:
            return scan.run(args)
        if args.command in relax.COMMANDS:
            return relax.run(args)
        if args.command in twists.COMMANDS:
            return twists.run(args)
        return _train(args)
    except Interrupted as err:
        hint = f"; continue with: {err.resume}" if err.saved and err.resume else ""
        print(f"psijax: {err}{hint}", file=sys.stderr)
        return 128 + err.signum
    except TrainingError as err:
        print(f"psijax: error: {err}", file=sys.stderr)
        return 3
    except PsijaxError as err:
        print(f"psijax: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("psijax: interrupted", file=sys.stderr)
        return 130


def _train(args: argparse.Namespace) -> int:
    from psijax import system
    from psijax.training.job import make_config, train

    overrides = flags.given(args)
    if args.resume:
        if args.force:
            raise InputError("--resume and --force contradict each other; give only one")
        overrides["out"] = args.resume
    config = make_config(resume=bool(args.resume), **overrides)
    system.for_config(config)
    if args.dry_run:
        from psijax.training import dryrun

        print(dryrun.describe(config, force=args.force, resume=bool(args.resume)), flush=True)
        return 0
    flags.join_distributed(args)
    result = train(config, progress=not args.quiet, force=args.force, resume=bool(args.resume))
    import jax

    if jax.process_index() != 0:
        return 0
    print("\n".join(final_lines(result)), flush=True)
    return 0


EV_PER_HARTREE = 27.211386245988  # CODATA 2018


def per_cell(system) -> str | None:
    """What a periodic system's energy is per, in words; None for a molecule."""
    if getattr(system, "lattice", None) is None:
        return None
    density = f", rs {system.rs:g}" if system.rs else ""
    return (
        f"the energy is per cell of {system.n_electrons} electrons, volume "
        f"{system.lattice.volume:.4g} bohr^3{density}"
    )


def final_lines(result) -> list[str]:
    """The report at the end of a run: energy, exact value, time, outputs, what next."""
    from psijax.run.progress import describe_estimate
    from psijax.statistics import Estimate, tail_note

    config = result.config
    lines = [f"system      {config.system}"]
    if result.states is None:
        lines.append(f"energy      {result.energy} Ha   ({describe_estimate(result.energy)})")
        if (cell := per_cell(getattr(result, "molecule", None))) is not None:
            n = result.molecule.n_electrons
            per = Estimate(result.energy.mean / n, result.energy.error / n, 0, 0, 0, 0.0)
            lines.append(f"per electron {per} Ha   ({cell})")
        if note := tail_note(result.energies, result.energy):
            lines.append(f"tail        {note}")
    else:
        ground = result.states[0].mean
        for i, e in enumerate(result.states):
            gap = (
                f"   (excitation {e.mean - ground:.5f} Ha, {27.211386 * (e.mean - ground):.3f} eV)"
            )
            lines.append(f"state {i:<5} {e} Ha" + gap * (i > 0))
        lines.append(f"sum         {result.energy} Ha   ({describe_estimate(result.energy)})")
        exact = result.molecule.exact_energy
        if exact is not None:
            diff, err = 1000 * (ground - exact), 1000 * result.states[0].error
            lines.append(
                f"exact       {exact:.6f} Ha (ground state)   (state 0 {diff:+.2f} ± {err:.2f} mHa)"
            )
    if result.exact is not None:
        diff = 1000 * (result.energy.mean - result.exact)
        err = 1000 * result.energy.error
        lines.append(
            f"exact       {result.exact:.6f} Ha   (difference {diff:+.2f} ± {err:.2f} mHa)"
        )
    out = shlex.quote(str(result.out))
    lines += [
        f"time        {result.seconds:.1f} s",
        f"outputs     {result.out}/: metrics.csv (one row per step), summary.json, "
        "config.json, energy.png, checkpoints/",
        f"continue    psijax train --resume {out} --steps {2 * config.steps}",
    ]
    return lines
