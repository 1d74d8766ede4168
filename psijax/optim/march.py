"""MARCH: SPRING's walker-space natural gradient under an adaptive diagonal metric.

MARCH (arXiv 2507.02644; jaqmc's default optimiser) keeps, for every parameter p, a moving
average of the variance of its score over the walkers,

    v_p <- beta v_p + (1 - beta) mean_w (C J)_wp^2,      C: the walker mean removed,

and solves SPRING's system (``psijax.optim.spring``) in the metric M = diag(sqrt(v_hat +
eps)) (``v_hat``: ``v`` with its start-up bias removed, as Adam does): with S =
M^-1/2, the step is S psi, where psi is SPRING's direction for the columns-scaled
jacobian J S and the previous step S^-1 phi_prev. Parameters whose scores vary a lot take
smaller steps, quiet ones larger, before the walkers x walkers solve; the rest (damping,
momentum, the learning rate's decay, the norm cap) is SPRING's.

It needs the jacobian's rows (``Leaves``, dense on each device, or ``Dense``); a run with
``--jacobian-blocks`` (a jacobian that never exists whole) is refused.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax.flatten_util import ravel_pytree

from psijax import precision, registry
from psijax.errors import UnsupportedError
from psijax.optim.base import CENTERED_ENERGIES, JACOBIAN, MESH, Optimizer
from psijax.optim.jacobian import Blocked, Dense, Leaves, _center
from psijax.optim.schedules import inverse_decay
from psijax.optim.spring import _direction, _direction_split
from psijax.types import Array


class MarchState(NamedTuple):
    previous: Array  # phi of the previous step, flat [n_params]
    variance: Array  # the moving average of each parameter's score variance, [n_params]
    count: Array


def march(
    learning_rate: float | None = None,
    decay_steps: float = 1000.0,
    damping: float = 1e-3,
    momentum: float = 0.99,
    max_norm: float = 0.1,
    beta: float = 0.995,
    eps: float = 1e-8,
    gram_precision: str | None = "high",
) -> Optimizer:
    """MARCH as an optax-style transformation with SPRING's interface
    (``update(grads, state, params, *, jacobian, centered_energies, mesh, axis)``); the
    learning rate defaults to its ``psijax.registry`` entry's. ``beta``: the variance's
    moving average; ``eps``: added to it before the square root."""
    if learning_rate is None:
        learning_rate = registry.OPTIMIZERS["march"].learning_rate
    schedule = inverse_decay(learning_rate, decay_steps)

    def init(params) -> MarchState:
        flat, _ = ravel_pytree(params)
        zeros = jnp.zeros_like(flat)
        return MarchState(zeros, zeros, jnp.zeros((), jnp.int32))

    def update(
        grads, state, params=None, *, jacobian, centered_energies, mesh=None, axis=None, **extra
    ):
        del params, extra
        if isinstance(jacobian, Blocked):
            raise UnsupportedError(
                "the march optimiser scales every column of the jacobian, which "
                "--jacobian-blocks never forms whole; drop --jacobian-blocks or use spring"
            )
        _, unravel = ravel_pytree(grads)
        rows = jacobian.dense() if isinstance(jacobian, Leaves) else jacobian
        rows = rows.rows if isinstance(rows, Dense) else rows
        centered = _center(rows)
        variance = beta * state.variance + (1 - beta) * jnp.mean(centered * centered, axis=0)
        count = state.count + 1
        unbiased = variance / (1 - beta ** count.astype(variance.dtype))
        scale = jax.lax.rsqrt(jnp.sqrt(unbiased + eps))  # S = M^-1/2, M = sqrt(v_hat + eps)
        split = mesh is not None and axis is not None and mesh.shape[axis] > 1
        if split:
            direction = functools.partial(_direction_split, mesh, axis)
            scaled = rows * scale
        else:
            direction, scaled = _direction, Dense(rows * scale)
        with precision.scope(gram_precision):
            psi = direction(
                scaled, centered_energies, state.previous / scale, damping=damping,
                momentum=momentum,
            )  # fmt: skip
        phi = scale * psi
        step = schedule(state.count) * phi
        norm = jnp.linalg.norm(step)
        step = step * jnp.minimum(1.0, max_norm / jnp.maximum(norm, 1e-30))
        return unravel(step), MarchState(phi, variance, count)

    return Optimizer(init, update, frozenset({JACOBIAN, CENTERED_ENERGIES, MESH}))


def from_config(config) -> Optimizer:
    return march(
        learning_rate=registry.learning_rate(config),
        decay_steps=config.decay_steps,
        gram_precision=config.gram_precision,
    )
