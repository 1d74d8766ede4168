"""The ``psijax`` command. Maps user strings to objects once, then calls ``psijax.vmc``."""

from __future__ import annotations

import argparse
import sys

from psijax import eval_cli
from psijax.errors import InputError, PsijaxError
from psijax.loop import Interrupted, TrainingError

FLAGS = {
    # flag: (config field, type, help)
    "--system": ("system", str, "preset (LiH, H2, Ne, ...), atom string or .xyz path"),
    "--charge": ("charge", int, "net charge"),
    "--spin": ("spin", int, "n_up - n_down"),
    "--unit": ("unit", str, "unit of atom-string coordinates: bohr or angstrom"),
    "--basis": ("basis", str, "basis for Hartree-Fock pretraining"),
    "--steps": ("steps", int, "training steps"),
    "--walkers": ("walkers", int, "walkers (a multiple of the device count)"),
    "--pretrain-steps": ("pretrain_steps", int, "Hartree-Fock pretraining steps"),
    "--optimizer": ("optimizer", str, "spring or adam"),
    "--learning-rate": ("learning_rate", float, "initial learning rate"),
    "--laplacian": ("laplacian", str, "default, forward, forward-sparse, loop or hessian"),
    "--determinants": ("determinants", int, "determinants in the FermiNet"),
    "--mcmc-moves": ("mcmc_moves", int, "MCMC moves per step"),
    "--burn-in-steps": ("burn_in_steps", int, "MCMC burn-in steps before training"),
    "--devices": ("devices", int, "devices to shard walkers over (default: all)"),
    "--seed": ("seed", int, "random seed"),
    "--out": ("out", str, "run directory"),
    "--checkpoint-every": ("checkpoint_every", int, "steps between checkpoints (0: by time only)"),
    "--checkpoint-minutes": ("checkpoint_minutes", float, "minutes between checkpoints"),
    "--keep-checkpoints": ("keep_checkpoints", int, "newest checkpoints to keep"),
    "--max-rejected": ("max_rejected", int, "rejected steps in a row that stop the run"),
}
# Per-process launch settings of a multi-process job (not part of the run's config).
DISTRIBUTED = {
    "--coordinator": (str, "process 0's host:port (env PSIJAX_COORDINATOR)"),
    "--num-processes": (int, "processes in the job (env PSIJAX_NUM_PROCESSES)"),
    "--process-id": (int, "this process's index, 0 .. n-1 (env PSIJAX_PROCESS_ID)"),
    "--coordinator-timeout": (float, "seconds to wait for the coordinator (default 300)"),
}


class _Parser(argparse.ArgumentParser):
    """argparse that reports a bad flag as one psijax error line instead of usage + exit."""

    def error(self, message: str):
        raise InputError(f"{message}; see '{self.prog} --help'")


def _whole_number(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None


def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None


_TYPES = {int: _whole_number, float: _number, str: str}


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="psijax", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    train = sub.add_parser("train", help="train a FermiNet and report the energy")
    train.add_argument("--config", help="TOML or JSON file of config keys (flags override it)")
    for flag, (_, kind, text) in FLAGS.items():
        train.add_argument(flag, type=_TYPES[kind], help=text, default=None)
    for flag, (kind, text) in DISTRIBUTED.items():
        train.add_argument(flag, type=_TYPES[kind], help=text, default=None)
    train.add_argument(
        "--distributed", action="store_true",
        help="join a multi-process job found by JAX's cluster detection (SLURM, ...)",
    )  # fmt: skip
    train.add_argument("--resume", metavar="DIR", help="continue the run in DIR")
    train.add_argument("--force", action="store_true", help="overwrite a run in --out")
    train.add_argument("--quiet", action="store_true", help="no progress display")
    eval_cli.add_parsers(sub, _TYPES)
    return parser


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        if args.command in eval_cli.COMMANDS:
            return eval_cli.run(args)
        return _train(args)
    except Interrupted as err:
        hint = f"; continue with: psijax train --resume {err.out}" if err.saved else ""
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
    from psijax import config as config_lib
    from psijax import distributed, system, vmc

    # only the keys the file sets, so that --resume can tell what would change
    overrides = config_lib.read_values(args.config) if args.config else {}
    overrides |= {
        field: getattr(args, field)
        for field, _, _ in FLAGS.values()
        if getattr(args, field) is not None
    }
    if args.resume:
        if args.force:
            raise InputError("--resume and --force contradict each other; give only one")
        overrides["out"] = args.resume
    config = vmc.make_config(resume=bool(args.resume), **overrides)
    system.resolve(config.system, charge=config.charge, spin=config.spin, unit=config.unit)
    distributed.initialize(
        args.coordinator, args.num_processes, args.process_id,
        auto=args.distributed, timeout_s=args.coordinator_timeout or 300.0,
    )  # fmt: skip
    result = vmc.train(config, progress=not args.quiet, force=args.force, resume=bool(args.resume))
    import jax

    if jax.process_index() != 0:
        return 0
    print(f"system      {config.system}")
    print(f"energy      {result.energy} Ha   (blocking analysis of the last "
          f"{result.energy.n_samples} steps)")  # fmt: skip
    if result.exact is not None:
        diff = 1000 * (result.energy.mean - result.exact)
        err = 1000 * result.energy.error
        print(f"exact       {result.exact:.6f} Ha   (difference {diff:+.2f} ± {err:.2f} mHa)")
    print(f"time        {result.seconds:.1f} s")
    print(f"outputs     {result.out}/ (metrics.csv, summary.json, energy.png)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
