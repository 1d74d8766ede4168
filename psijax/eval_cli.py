"""The ``psijax evaluate`` and ``psijax report`` commands (parsers and what they run).

Imported by ``psijax.cli`` when it builds its parser; JAX is imported only when a command
runs, so ``--help`` stays fast.
"""

from __future__ import annotations

import argparse
import sys

COMMANDS = ("evaluate", "report")


def add_parsers(sub, types: dict) -> None:
    """Add the two subcommands to ``sub`` (``argparse`` subparsers); ``types`` maps
    int/float to the CLI's one-line-error converters."""
    whole, number = types[int], types[float]
    ev = sub.add_parser("evaluate", help="evaluate a trained run with frozen parameters")
    ev.add_argument("run", metavar="RUN", help="a training run directory (its --out)")
    ev.add_argument("--steps", type=whole, help="evaluation steps (default 2000; with "
                    "--target-error the most steps taken, default 100000)")  # fmt: skip
    ev.add_argument("--walkers", type=whole, help="walkers (default: the training's)")
    ev.add_argument("--target-error", type=number, metavar="HA",
                    help="stop once the energy error bar is below this (Hartree)")  # fmt: skip
    ev.add_argument("--observables", nargs="+", metavar="NAME",
                    help="energy, spin, dipole, forces (default: all; energy always)")  # fmt: skip
    ev.add_argument("--burn-in-steps", type=whole,
                    help="MCMC steps re-equilibrating the walkers (default 100)")  # fmt: skip
    ev.add_argument("--seed", type=whole, help="random seed (default 0)")
    ev.add_argument("--devices", type=whole, help="devices to shard walkers over")
    ev.add_argument("--save-positions", action="store_true",
                    help="also store every walker's electron positions in walkers.h5")  # fmt: skip
    ev.add_argument("--force", action="store_true", help="replace an existing RUN/eval/")
    ev.add_argument("--resume", action="store_true",
                    help="continue the evaluation in RUN/eval/ after a kill")  # fmt: skip
    ev.add_argument("--quiet", action="store_true", help="no progress display")
    rep = sub.add_parser("report", help="reprint a run's summary and redraw its plots")
    rep.add_argument("run", metavar="RUN", help="a run directory")


def run(args: argparse.Namespace) -> int:
    if args.command == "report":
        from psijax.run.eval_report import report

        print(report(args.run))
        return 0
    from psijax import distributed
    from psijax.run.eval_report import format_summary
    from psijax.run.evaluate import EvalSettings, evaluate
    from psijax.run.loop import Interrupted
    from psijax.wavefunction import check_run

    burn_in = 100 if args.burn_in_steps is None else args.burn_in_steps
    EvalSettings.make(  # bad numbers fail before JAX starts
        args.steps, args.walkers, burn_in, args.target_error, args.observables, args.seed or 0
    )
    check_run(args.run)
    distributed.initialize(None, None, None, auto=False, timeout_s=300.0)
    try:
        result = evaluate(
            args.run, steps=args.steps, walkers=args.walkers, target_error=args.target_error,
            observables=args.observables, burn_in=args.burn_in_steps, seed=args.seed,
            devices=args.devices, save_positions=args.save_positions, force=args.force,
            resume=args.resume, progress=not args.quiet,
        )  # fmt: skip
    except Interrupted as err:
        print(f"psijax: {err}; continue with: psijax evaluate {args.run} --resume", file=sys.stderr)
        return 128 + err.signum
    import jax

    if jax.process_index() == 0:
        print(format_summary(result.summary))
        files = "metrics.csv, walkers.h5, summary.json, eval.png"
        print(f"{'outputs':<24}{result.out}/ ({files})")
    return 0
