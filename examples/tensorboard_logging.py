"""Watch a psijax run in TensorBoard: every step's metrics as scalars, through ``on_step``.

Needs tensorboardX, an optional extra (``pip install "psijax[tensorboard]"`` or
``pip install tensorboardX``); psijax itself does not depend on it. Then

    python examples/tensorboard_logging.py --system H2 --steps 500 --out runs/h2-tb
    tensorboard --logdir runs/h2-tb/tensorboard

The same few lines send the metrics to Weights & Biases (``wandb.log(metrics, step=step)``)
or anything else that takes numbers.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import psijax


def main(argv: list[str] | None = None, **settings) -> psijax.training.job.TrainResult:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--system", default="H2")
    parser.add_argument("--steps", type=int, default=500)
    parser.add_argument("--out", default="runs/h2-tb")
    args = parser.parse_args(argv)

    from tensorboardX import SummaryWriter  # the optional extra

    logdir = Path(args.out) / "tensorboard"
    with SummaryWriter(str(logdir)) as board:

        def on_step(step: int, metrics: dict[str, float]) -> None:
            # called after every step with the columns of metrics.csv (Hartree, seconds, ...)
            for name, value in metrics.items():
                board.add_scalar(f"train/{name}", value, step)

        result = psijax.train(
            system=args.system, steps=args.steps, out=args.out, on_step=on_step, **settings
        )
        board.add_text("energy", f"{result.energy} Ha (exact {result.exact})")
    print(f"E = {result.energy} Ha; tensorboard --logdir {logdir}")
    return result


if __name__ == "__main__":
    main()
