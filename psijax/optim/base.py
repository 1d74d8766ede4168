"""What an optimiser is to the training step: an optax transformation plus the extra
inputs its ``update`` needs, declared by name.

The step reads ``needs`` and computes only what is asked for; it never looks at an
optimiser's name. A plain optax transformation (no ``needs``) gets the VMC gradient only.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import optax

# Per-walker d log|psi| / d params, in ``ravel_pytree(params)`` order: a
# ``psijax.optim.jacobian.Leaves`` (one [walkers, P_leaf] block per parameter leaf;
# ``.dense()`` is the [walkers, P] array), or a ``psijax.optim.jacobian.Blocked`` (products
# only) when the run asks for jacobian blocks.
JACOBIAN = "jacobian"
# Clipped local energies minus their mean, 0 for dropped walkers: [walkers].
CENTERED_ENERGIES = "centered_energies"
# The mesh and the name of its walker axis, for optimisers that split work over devices.
MESH = "mesh"
PER_WALKER = frozenset({JACOBIAN, CENTERED_ENERGIES})


class Optimizer(NamedTuple):
    """``init(params)`` and ``update(grads, state, params, **extras)`` as in optax."""

    init: Callable
    update: Callable
    needs: frozenset[str] = frozenset()


def needs_of(optimizer) -> frozenset[str]:
    """The extra inputs ``optimizer`` declares (none for a plain optax transformation)."""
    return frozenset(getattr(optimizer, "needs", ()))


def with_needs(tx: optax.GradientTransformationExtraArgs, *needs: str) -> Optimizer:
    return Optimizer(tx.init, tx.update, frozenset(needs))
