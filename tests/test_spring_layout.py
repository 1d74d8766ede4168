"""SPRING with walkers split over devices: the same update as the formula, and a compiled
step in which no device holds, gathers or reduces the whole [walkers, params] jacobian."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.flatten_util import ravel_pytree
from test_spring import reference
from test_step import setup

from psijax import optim, parallel
from psijax.optim import jacobian as jacobian_lib
from psijax.parallel.hlo import collectives


@pytest.mark.parametrize("n_devices", [2, 4])
def test_split_update_matches_the_formula(n_devices):
    """Rows on d devices, parameters in blocks (31 parameters: padded to a multiple of d)."""
    rng = np.random.default_rng(n_devices)
    n, p = 16, 31
    params = {"a": jnp.zeros((3, 7)), "b": jnp.zeros((10,))}
    jacobian = rng.normal(size=(n, p)) + 3.0
    centered = rng.normal(size=n)
    centered -= centered.mean()
    mesh = parallel.make_mesh(n_devices)
    rows = parallel.walker_sharding(mesh)
    with jax.enable_x64(True):
        opt = optim.spring(
            learning_rate=0.1, decay_steps=1e12, damping=1e-3, momentum=0.9, max_norm=1e3
        )
        state = opt.init(params)
        update = jax.jit(
            lambda s, j, c: opt.update(
                params, s, params, jacobian=j, centered_energies=c,
                mesh=mesh, axis=parallel.WALKER_AXIS,
            )
        )  # fmt: skip
        previous = np.zeros(p)
        by_leaf = state  # the same jacobian as one block per parameter leaf (what the step gives)
        for _ in range(2):  # the second step exercises the momentum term
            j = jax.device_put(jacobian, rows)
            updates, state = update(state, j, jax.device_put(centered, rows))
            leaves = jacobian_lib.Leaves((j[:, :21], j[:, 21:]))
            leaf_updates, by_leaf = update(by_leaf, leaves, jax.device_put(centered, rows))
            want, previous = reference(
                jacobian, centered, previous, lr=0.1, damping=1e-3, momentum=0.9, max_norm=1e3
            )
            for got in (updates, leaf_updates):
                np.testing.assert_allclose(ravel_pytree(got)[0], want, rtol=1e-9, atol=1e-12)
            np.testing.assert_allclose(state.previous, previous, rtol=1e-9, atol=1e-12)


def test_the_compiled_step_never_moves_or_holds_the_whole_jacobian():
    n_devices, n_walkers = 4, 32
    step, state = setup(n_devices, optim.spring(), n_walkers=n_walkers)
    n_params = ravel_pytree(state.params)[0].size
    hlo = step.lower(state).compile().as_text()
    found = collectives(hlo)
    assert any(kind == "all-to-all" for kind, _ in found), found
    block = n_walkers * -(-n_params // n_devices)  # one device's column block
    assert max(size for _, size in found) <= block, (found, block)
    assert f"[{n_walkers},{n_params}]" not in hlo, "a device holds the whole jacobian"
