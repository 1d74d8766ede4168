"""Learning-rate schedules."""

from __future__ import annotations

import optax


def inverse_decay(learning_rate: float, decay_steps: float) -> optax.Schedule:
    """lr0 / (1 + t / t0): the decay used for VMC optimisers since FermiNet."""
    return lambda count: learning_rate / (1.0 + count / decay_steps)
