"""The jacobian's forms (psijax/optim/jacobian.py): per-leaf blocks and parameter blocks give
the same products and SPRING update as the whole one, and compiled training steps that never
hold [walkers, params]."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.flatten_util import ravel_pytree
from test_step import MOL, NET, assert_same_steps, setup

from psijax import hamiltonian, laplacian, optim, parallel, sampling, system
from psijax.ansatz.base import nuclei_of
from psijax.ansatz.ferminet import FermiNet
from psijax.ansatz.psiformer import PsiFormer
from psijax.optim import jacobian
from psijax.run.loop import run_steps
from psijax.training.state import train_state
from psijax.training.step import StepConfig, make_step

from close import assert_close


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


def _leaves(params, walkers, keep):
    safe = jnp.where(keep[:, None, None] > 0, walkers, walkers[0])
    rows = jax.vmap(jax.grad(NET.log_abs), in_axes=(None, 0))(params, safe)
    rows = jax.tree.map(lambda g: g.at[5].set(jnp.nan), rows)  # the lost walker's row
    return jacobian.Leaves.of(rows, keep)


def test_leaf_blocks_give_the_products_of_the_whole_jacobian():
    with jax.enable_x64(True):
        params, walkers, keep = _problem()
        rows = _dense(params, walkers, keep)
        c = rows - rows.mean(axis=0)
        leaves = _leaves(params, walkers, keep)
        assert len(leaves.blocks) > 3
        rng = np.random.default_rng(0)
        v, x = rng.normal(size=rows.shape[1]), rng.normal(size=rows.shape[0])
        np.testing.assert_allclose(leaves.centered_matvec(v), c @ v, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(leaves.centered_rmatvec(x), x @ c, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(leaves.centered_gram(jnp.float64), c @ c.T, rtol=1e-10)
        np.testing.assert_array_equal(leaves.dense(), rows)
        tree = leaves.rmatvec_like(params, x)
        assert jax.tree.structure(tree) == jax.tree.structure(params)
        np.testing.assert_allclose(ravel_pytree(tree)[0], x @ rows, rtol=1e-10, atol=1e-12)


def test_spring_takes_the_same_step_from_blocks():
    with jax.enable_x64(True):
        params, walkers, keep = _problem()
        rows = _dense(params, walkers, keep)
        centered = jnp.asarray(np.random.default_rng(1).normal(size=rows.shape[0])) * keep
        centered = (centered - centered.sum() / keep.sum()) * keep
        opt = optim.spring(learning_rate=0.1, momentum=0.9, max_norm=1e3)
        forms = {
            "dense": rows,
            "blocked": jacobian.blocked(NET.log_abs, params, walkers, keep, n_blocks=4),
            "leaves": _leaves(params, walkers, keep),
        }
        state = {name: opt.init(params) for name in forms}
        for _ in range(2):  # the second step exercises the momentum term
            updates = {}
            for name, jac in forms.items():
                updates[name], state[name] = opt.update(
                    params, state[name], params, jacobian=jac, centered_energies=centered
                )
            for name in ("blocked", "leaves"):
                np.testing.assert_allclose(
                    ravel_pytree(updates[name])[0],
                    ravel_pytree(updates["dense"])[0],
                    rtol=1e-9,
                    atol=1e-12,
                )


def test_a_blocked_step_trains_like_the_whole_one_without_holding_the_jacobian():
    """In float32 the two sum the Gram matrix in another order: the first update agrees
    to rounding (7e-6 of its norm), and three steps from random parameters, whose energy
    moves by ~1 Ha a step, to 1e-4 (the exact agreement, in float64, is the test above)."""
    n_walkers = 32
    runs = {}
    for blocks in (1, 4):
        # one program each: walker groups (tests/test_groups.py) differ by round-off
        step, state = setup(
            1, optim.spring(), n_walkers=n_walkers,
            config=StepConfig(chunk_size=8, jacobian_blocks=blocks, groups=1),
        )  # fmt: skip
        n_params = ravel_pytree(state.params)[0].size
        hlo = step.lower(state).compile().as_text()  # per-leaf blocks or parameter blocks
        assert f"[{n_walkers},{n_params}]" not in hlo, "the whole jacobian is formed"
        start = np.asarray(ravel_pytree(state.params)[0]).copy()  # the step donates state
        state, metrics = run_steps(step, state, 1)
        first = np.asarray(ravel_pytree(state.params)[0]) - start
        state, more = run_steps(step, state, 2)
        runs[blocks] = (metrics + more, ravel_pytree(state.params)[0], first)
    update = np.linalg.norm(runs[4][2] - runs[1][2]) / np.linalg.norm(runs[1][2])
    assert update < 1e-5, update
    assert runs[4][0][0]["energy"] == runs[1][0][0]["energy"]  # the same walkers and parameters
    assert_same_steps(runs[4][0], runs[1][0], rtol=1e-4)
    assert_close(runs[4][1], runs[1][1], rtol=1e-4)  # relative to the parameters' scale


# Two electrons and wide enough layers that every tapped weight is cheaper in factors
H2 = system.preset("H2")
TAPPED = FermiNet(1, 1, nuclei_of(H2), layers=((16, 4), (16, 4)), n_determinants=2)
# with LayerNorm: its scale and offset between the tapped products
ATTENTION = PsiFormer(
    1, 1, nuclei_of(H2), layers=2, heads=2, head_dim=8, n_determinants=2, layer_norm=True
)


@pytest.mark.parametrize(
    ("net", "n_factored"),
    [(TAPPED, 4), (ATTENTION, 12)],  # two layers and two projections; five per layer + two
    ids=["ferminet", "psiformer"],
)
def test_tapped_layers_give_the_products_of_the_whole_jacobian(net, n_factored):
    with jax.enable_x64(True):
        params = jax.tree.map(lambda a: a.astype(jnp.float64), net.init(jax.random.PRNGKey(0)))
        walkers = sampling.init_walkers(jax.random.PRNGKey(1), H2, 12).astype(jnp.float64)
        keep = jnp.ones(12).at[3].set(0.0).at[5].set(0.0)  # a dropped and a lost walker
        walkers = walkers.at[5].set(jnp.nan)
        safe = jnp.where(keep[:, None, None] > 0, walkers, walkers[0])
        grad = lambda r: ravel_pytree(jax.grad(net.log_abs)(params, r))[0]
        rows = jax.vmap(grad)(safe) * keep[:, None]
        c = rows - rows.mean(axis=0)
        leaves = jacobian.leaves(net.log_abs, params, walkers, keep)
        factored = [isinstance(b, jacobian.Factored) for b in leaves.blocks]
        assert sum(factored) == n_factored, factored
        assert not all(factored)  # biases, envelopes, ... as rows
        rng = np.random.default_rng(0)
        v, x = rng.normal(size=rows.shape[1]), rng.normal(size=rows.shape[0])
        np.testing.assert_allclose(leaves.centered_matvec(v), c @ v, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(leaves.centered_rmatvec(x), x @ c, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(leaves.centered_gram(jnp.float64), c @ c.T, rtol=1e-10)
        np.testing.assert_allclose(leaves.dense(), rows, rtol=1e-12, atol=1e-14)
        tree = leaves.rmatvec_like(params, x)
        assert jax.tree.structure(tree) == jax.tree.structure(params)
        np.testing.assert_allclose(ravel_pytree(tree)[0], x @ rows, rtol=1e-10, atol=1e-12)


def test_factored_gram_keeps_a_large_mean_in_float32():
    """Rows whose mean is ~4x their spread: the factored Gram matrix in float32 agrees with
    float64 as closely as the one from the centered rows does (without the shift of the
    factors, C (J J^T) C in float32: 11x further)."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(32, 4, 24)) + 3.0
    g = rng.normal(size=(32, 4, 16)) + 3.0
    rows = np.einsum("wki,wko->wio", x, g).reshape(32, -1)
    c = rows - rows.mean(axis=0)
    assert np.abs(rows.mean(axis=0)).mean() > 3 * c.std()
    want = c @ c.T
    block = jacobian.Factored(jnp.asarray(x, jnp.float32), jnp.asarray(g, jnp.float32))
    factored = np.asarray(block.centered_gram(jnp.float32), np.float64)
    dense = np.asarray(jacobian.Dense(jnp.asarray(rows, jnp.float32)).centered_gram(jnp.float32))
    err = lambda gram: np.abs(gram - want).max() / np.abs(want).max()
    assert err(factored) < 2 * err(dense), (err(factored), err(dense))


def _three_steps(log_abs, n_devices=1, dtype=jnp.float32):
    """Energies, final parameters and the first update of three SPRING steps of TAPPED."""
    local_energy = hamiltonian.molecular(H2, laplacian.Forward()).local_energy(TAPPED)
    mesh = parallel.make_mesh(n_devices)
    opt = optim.spring()
    params = TAPPED.init(jax.random.PRNGKey(0), dtype)
    walkers = sampling.init_walkers(jax.random.PRNGKey(1), H2, 32).astype(dtype)
    state = train_state(TAPPED, opt, params, walkers, jax.random.PRNGKey(2), mesh=mesh)
    step = make_step(log_abs, local_energy, opt, StepConfig(), mesh, state, sampling.Metropolis(2))
    start = np.asarray(ravel_pytree(state.params)[0]).copy()
    state, metrics = run_steps(step, state, 1)
    first = np.asarray(ravel_pytree(state.params)[0]) - start
    state, more = run_steps(step, state, 2)
    return metrics + more, np.asarray(ravel_pytree(state.params)[0]), first


def test_a_step_with_factors_trains_like_one_with_rows():
    """The same step with the tapped weights in factors and (``log_abs`` not a network's
    method: no taps) as rows, three steps in float64: the same updates and energies. (In
    float32 the first updates differ by 1.5e-5 of their norm: rounding in the Gram
    matrix, sums in another order, amplified by the solve.)"""
    with jax.enable_x64(True):
        factors = _three_steps(TAPPED.log_abs, dtype=jnp.float64)
        rows = _three_steps(lambda p, r: TAPPED.log_abs(p, r), dtype=jnp.float64)
    assert np.linalg.norm(factors[2] - rows[2]) < 1e-10 * np.linalg.norm(rows[2])
    assert_same_steps(factors[0], rows[0], rtol=1e-10)
    assert_close(factors[1], rows[1], rtol=1e-9)


def test_factors_on_walkers_split_over_devices():
    """Over 4 devices SPRING lays the jacobian out by columns (the factored blocks formed as
    rows there): the energies of 1 device, as for rows (test_step.py)."""
    one, four = _three_steps(TAPPED.log_abs, 1), _three_steps(TAPPED.log_abs, 4)
    assert_same_steps(four[0], one[0])
