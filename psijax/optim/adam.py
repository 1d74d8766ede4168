"""Adam with an inverse-time learning-rate decay and gradient-norm clipping."""

from __future__ import annotations

import optax

from psijax.optim.base import Optimizer, with_needs
from psijax.optim.schedules import inverse_decay


def adam(
    learning_rate: float = 3e-3, decay_steps: float = 1000.0, max_norm: float = 1.0
) -> Optimizer:
    """Adam on the VMC gradient; needs no extra inputs."""
    tx = optax.chain(
        optax.clip_by_global_norm(max_norm),
        optax.adam(inverse_decay(learning_rate, decay_steps)),
    )
    return with_needs(optax.with_extra_args_support(tx))
