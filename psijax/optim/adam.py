"""Adam with an inverse-time learning-rate decay and gradient-norm clipping."""

from __future__ import annotations

import optax

from psijax import registry
from psijax.optim.base import Optimizer, with_needs
from psijax.optim.schedules import inverse_decay


def adam(
    learning_rate: float | None = None, decay_steps: float = 1000.0, max_norm: float = 1.0
) -> Optimizer:
    """Adam on the VMC gradient; needs no extra inputs. The learning rate defaults to its
    ``psijax.registry`` entry's."""
    if learning_rate is None:
        learning_rate = registry.OPTIMIZERS["adam"].learning_rate
    tx = optax.chain(
        optax.clip_by_global_norm(max_norm),
        optax.adam(inverse_decay(learning_rate, decay_steps)),
    )
    return with_needs(optax.with_extra_args_support(tx))


def from_config(config) -> Optimizer:
    return adam(learning_rate=registry.learning_rate(config), decay_steps=config.decay_steps)
