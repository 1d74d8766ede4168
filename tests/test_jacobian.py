"""The blocked jacobian (psijax/optim/jacobian.py): the same products as the whole one, the same
SPRING update, and a compiled training step that never holds [walkers, params]."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.flatten_util import ravel_pytree
from test_step import MOL, NET, setup

from psijax import optim, sampling
from psijax.optim import jacobian
from psijax.run.loop import run_steps
from psijax.training.step import StepConfig


def _problem(n_walkers=12):
    params = jax.tree.map(lambda a: a.astype(jnp.float64), NET.init(jax.random.PRNGKey(0)))
    walkers = sampling.init_walkers(jax.random.PRNGKey(1), MOL, n_walkers).astype(jnp.float64)
    keep = jnp.ones(n_walkers).at[3].set(0.0)  # a dropped walker: its row is 0
    walkers = walkers.at[5].set(jnp.nan)  # a lost one (never reaches a sum)
    keep = keep.at[5].set(0.0)
    return params, walkers, keep


def _dense(params, walkers, keep):
    safe = jnp.where(keep[:, None, None] > 0, walkers, walkers[0])
    grad = lambda r: ravel_pytree(jax.grad(NET.log_abs)(params, r))[0]
    return jax.vmap(grad)(safe) * keep[:, None]


@pytest.mark.parametrize("chunk_size", [None, 4])  # one pass over the walkers, or 3 chunks
def test_blocked_products_equal_those_of_the_whole_jacobian(chunk_size):
    with jax.enable_x64(True):
        params, walkers, keep = _problem()
        rows = _dense(params, walkers, keep)
        c = rows - rows.mean(axis=0)
        assert rows.shape[1] % 7, "7 blocks must not divide the parameters: the last is padded"
        blocked = jacobian.blocked(NET.log_abs, params, walkers, keep, 7, chunk_size)
        rng = np.random.default_rng(0)
        v, x = rng.normal(size=rows.shape[1]), rng.normal(size=rows.shape[0])
        np.testing.assert_allclose(blocked.centered_matvec(v), c @ v, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(blocked.centered_rmatvec(x), x @ c, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(blocked.rmatvec(x), x @ rows, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(
            blocked.centered_gram(jnp.float64), c @ c.T, rtol=1e-10, atol=1e-12
        )
        dense = jacobian.Dense(rows)
        np.testing.assert_allclose(dense.centered_gram(jnp.float64), c @ c.T, rtol=1e-12)


def test_spring_takes_the_same_step_from_blocks():
    with jax.enable_x64(True):
        params, walkers, keep = _problem()
        rows = _dense(params, walkers, keep)
        centered = jnp.asarray(np.random.default_rng(1).normal(size=rows.shape[0])) * keep
        centered = (centered - centered.sum() / keep.sum()) * keep
        opt = optim.spring(learning_rate=0.1, momentum=0.9, max_norm=1e3)
        state = {"dense": opt.init(params), "blocked": opt.init(params)}
        for _ in range(2):  # the second step exercises the momentum term
            blocked = jacobian.blocked(NET.log_abs, params, walkers, keep, n_blocks=4)
            up_d, state["dense"] = opt.update(
                params, state["dense"], params, jacobian=rows, centered_energies=centered
            )
            up_b, state["blocked"] = opt.update(
                params, state["blocked"], params, jacobian=blocked, centered_energies=centered
            )
            np.testing.assert_allclose(
                ravel_pytree(up_b)[0], ravel_pytree(up_d)[0], rtol=1e-9, atol=1e-12
            )


def test_a_blocked_step_trains_like_the_whole_one_without_holding_the_jacobian():
    n_walkers = 32
    runs = {}
    for blocks in (1, 4):
        step, state = setup(
            1, optim.spring(), n_walkers=n_walkers,
            config=StepConfig(chunk_size=8, jacobian_blocks=blocks),
        )  # fmt: skip
        if blocks > 1:
            n_params = ravel_pytree(state.params)[0].size
            hlo = step.lower(state).compile().as_text()
            assert f"[{n_walkers},{n_params}]" not in hlo, "the whole jacobian is formed"
        state, metrics = run_steps(step, state, 3)
        runs[blocks] = ([m["energy"] for m in metrics], ravel_pytree(state.params)[0])
    np.testing.assert_allclose(runs[4][0], runs[1][0], rtol=1e-5)
    np.testing.assert_allclose(runs[4][1], runs[1][1], rtol=1e-4, atol=1e-5)
