"""What an evaluation does, checked once before anything is read or written; its defaults.

Read by ``psijax evaluate`` before JAX starts, so that bad numbers fail at once.
"""

from __future__ import annotations

import dataclasses
import math

from psijax.errors import InputError
from psijax.estimators import observables

STEPS = 2000  # evaluation steps
TARGET_MAX_STEPS = 100_000  # the most steps of a --target-error evaluation without --steps
BURN_IN = 100  # MCMC steps that re-equilibrate the walkers under the frozen parameters
CHECKPOINT_EVERY = 200  # steps between checkpoints (and every 10 minutes)
KEEP_CHECKPOINTS = 2
SEED = 0


@dataclasses.dataclass(frozen=True)
class EvalSettings:
    steps: int = STEPS
    walkers: int | None = None  # None: the training's
    burn_in: int = BURN_IN
    target_error: float | None = None  # Hartree
    observables: tuple[str, ...] = observables.DEFAULT
    seed: int = SEED
    save_positions: bool = False
    checkpoint_every: int = CHECKPOINT_EVERY

    @classmethod
    def make(
        cls, steps=None, walkers=None, burn_in=None, target_error=None, observable_names=None,
        seed=None, save_positions=False, checkpoint_every=None,
    ) -> EvalSettings:  # fmt: skip
        """Settings from user values (None: the default); bad values raise ``InputError``."""
        if target_error is not None:
            target_error = _number("target_error", target_error)
            if not (math.isfinite(target_error) and target_error > 0):
                raise InputError(
                    f"target_error={target_error} must be a positive number of Hartree, e.g. 1e-4"
                )
        if steps is None:
            steps = STEPS if target_error is None else TARGET_MAX_STEPS
        return cls(
            steps=_whole("steps", steps, minimum=2),
            walkers=None if walkers is None else _whole("walkers", walkers, minimum=1),
            burn_in=_whole("burn_in", BURN_IN if burn_in is None else burn_in, minimum=0),
            target_error=target_error,
            observables=observables.parse(observable_names),
            seed=_whole("seed", SEED if seed is None else seed, minimum=0),
            save_positions=bool(save_positions),
            checkpoint_every=_whole(
                "checkpoint_every",
                CHECKPOINT_EVERY if checkpoint_every is None else checkpoint_every,
                minimum=1,
            ),
        )


def _whole(name: str, value, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise InputError(f"{name}={value!r} must be a whole number >= {minimum}")
    try:
        number = float(value)
    except ValueError:
        raise InputError(f"{name}={value!r} must be a whole number >= {minimum}") from None
    if not number.is_integer() or number < minimum:
        raise InputError(f"{name}={value!r} must be a whole number >= {minimum}")
    return int(number)


def _number(name: str, value) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        raise InputError(f"{name}={value!r} is not a number; give e.g. 1e-4") from None
