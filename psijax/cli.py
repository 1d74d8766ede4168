"""The ``psijax`` command. Maps user strings to objects once, then calls ``psijax.vmc``."""

from __future__ import annotations

import argparse
import sys

from psijax.errors import PsijaxError

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
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="psijax", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    train = sub.add_parser("train", help="train a FermiNet and report the energy")
    train.add_argument("--config", help="TOML or JSON file of config keys (flags override it)")
    for flag, (_, kind, text) in FLAGS.items():
        train.add_argument(flag, type=kind, help=text, default=None)
    train.add_argument("--force", action="store_true", help="overwrite a run in --out")
    train.add_argument("--quiet", action="store_true", help="no progress display")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return _train(args)
    except PsijaxError as err:
        print(f"psijax: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("psijax: interrupted", file=sys.stderr)
        return 130


def _train(args: argparse.Namespace) -> int:
    from psijax import config as config_lib
    from psijax import vmc

    config = config_lib.load(args.config) if args.config else config_lib.Config()
    overrides = {
        field: getattr(args, field)
        for field, _, _ in FLAGS.values()
        if getattr(args, field) is not None
    }
    config = config_lib.from_dict(overrides, config)
    result = vmc.train(config, progress=not args.quiet, force=args.force)
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
