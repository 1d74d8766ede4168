"""The ``psijax evaluate`` and ``psijax report`` commands (parsers and what they run).

Imported by ``psijax.cli`` when it builds its parser; JAX is imported only when a command
runs, so ``--help`` stays fast.
"""

from __future__ import annotations

import argparse

from psijax.cli import flags
from psijax.estimators import observables
from psijax.evaluation import settings

COMMANDS = ("evaluate", "report")


def add_parsers(sub) -> None:
    """Add the two subcommands to ``sub`` (``argparse`` subparsers)."""
    whole, number = flags.whole_number, flags.number
    ev = sub.add_parser("evaluate", help="evaluate a trained run with frozen parameters")
    ev.add_argument("run", metavar="RUN", help="a training run directory (its --out)")
    ev.add_argument("--steps", type=whole, help=f"evaluation steps (default {settings.STEPS}; "
                    "with --target-error the most steps taken, default "
                    f"{settings.TARGET_MAX_STEPS})")  # fmt: skip
    ev.add_argument("--walkers", type=whole, help="walkers (default: the training's)")
    ev.add_argument("--target-error", type=number, metavar="HA",
                    help="stop once the energy's error bar is below this (Hartree) and the "
                    "evaluation's halves agree")  # fmt: skip
    ev.add_argument(
        "--observables",
        nargs="+",
        metavar="NAME",
        help=f"{', '.join(observables.DEFAULT)} (default: all; energy always)",
    )
    ev.add_argument("--burn-in-steps", type=whole, help="MCMC steps re-equilibrating the "
                    f"walkers (default {settings.BURN_IN})")  # fmt: skip
    ev.add_argument("--checkpoint-every", type=whole, help="steps between checkpoints "
                    f"(default {settings.CHECKPOINT_EVERY}; also every 10 minutes)")  # fmt: skip
    ev.add_argument("--seed", type=whole, help=f"random seed (default {settings.SEED})")
    ev.add_argument("--stall-timeout", type=number, metavar="S", help="seconds a step may "
                    "take at least before the evaluation calls it stalled (default: the "
                    "training's)")  # fmt: skip
    ev.add_argument("--devices", type=whole, help="devices to shard walkers over")
    ev.add_argument("--save-positions", action="store_true",
                    help="also store every walker's electron positions in walkers.h5")  # fmt: skip
    ev.add_argument("--force", action="store_true", help="replace an existing RUN/eval/")
    ev.add_argument("--resume", action="store_true",
                    help="continue the evaluation in RUN/eval/ after a kill")  # fmt: skip
    ev.add_argument("--quiet", action="store_true", help="no progress display")
    flags.add_distributed_flags(ev)
    rep = sub.add_parser("report", help="reprint a run's summary and redraw its plots")
    rep.add_argument("run", metavar="RUN", help="a run directory")


def run(args: argparse.Namespace) -> int:
    if args.command == "report":
        from psijax.rundir.report import report

        print(report(args.run))
        return 0
    from psijax.evaluation.job import evaluate
    from psijax.rundir.report import format_summary
    from psijax.training.saved import check_run

    settings.EvalSettings.make(  # bad numbers fail before JAX starts
        args.steps, args.walkers, args.burn_in_steps, args.target_error, args.observables,
        args.seed, checkpoint_every=args.checkpoint_every,
    )  # fmt: skip
    check_run(args.run)
    flags.join_distributed(args)
    result = evaluate(
        args.run, steps=args.steps, walkers=args.walkers, target_error=args.target_error,
        observables=args.observables, burn_in=args.burn_in_steps, seed=args.seed,
        devices=args.devices, save_positions=args.save_positions, force=args.force,
        resume=args.resume, checkpoint_every=args.checkpoint_every, progress=not args.quiet,
        stall_timeout=args.stall_timeout,
    )  # fmt: skip
    import jax

    if jax.process_index() == 0:
        print(format_summary(result.summary))
        files = "metrics.csv, walkers.h5, summary.json, eval.png"
        print(f"{'outputs':<24}{result.out}/ ({files})")
    return 0
