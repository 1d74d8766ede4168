"""The sharded train step: no recompiles, 1 vs 4 devices agree, non-finite values never
reach the parameters, and the VMC gradient estimator is the textbook one."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from psijax import hamiltonian, laplacian, optim, parallel, sampling, system
from psijax.ansatz import FermiNet
from psijax.optim.gradient import make_energy_loss
from psijax.parallel.batching import map_walkers
from psijax.run.loop import run_steps
from psijax.training.state import train_state
from psijax.training.step import StepConfig, make_step

from close import assert_energies_close, column
from laplacian_cells import N_DEVICES

MOL = system.preset("LiH")
NET = FermiNet(MOL.n_up, MOL.n_down, tuple(map(tuple, MOL.nuclear_positions.tolist())),
               layers=((8, 4),), n_determinants=2)  # fmt: skip
LOCAL_ENERGY = hamiltonian.molecular(MOL, laplacian.Forward()).local_energy(NET)


def assert_same_steps(rows, expected_rows, rtol=1e-5):
    """The same steps' mean energies on another layout: float32 sums in another order."""
    variance = column(expected_rows, "variance")
    assert_energies_close(column(rows, "energy"), column(expected_rows, "energy"), variance,
                          rtol=rtol)  # fmt: skip


def setup(n_devices, optimizer, local_energy=LOCAL_ENERGY, n_walkers=16, config=None):
    mesh = parallel.make_mesh(n_devices)
    params = NET.init(jax.random.PRNGKey(0))
    walkers = sampling.init_walkers(jax.random.PRNGKey(1), MOL, n_walkers)
    state = train_state(NET, optimizer, params, walkers, jax.random.PRNGKey(2), mesh=mesh)
    config = config if config is not None else StepConfig()
    sampler = sampling.Metropolis(2)
    return make_step(NET.log_abs, local_energy, optimizer, config, mesh, state, sampler), state


@pytest.mark.compat
@pytest.mark.parametrize("name", ["adam", "spring"])
def test_steady_state_steps_never_recompile(name):
    opt = optim.adam() if name == "adam" else optim.spring()
    step, state = setup(N_DEVICES, opt)
    run_steps(step, state, 4)
    assert step._cache_size() == 1


def test_one_and_four_devices_give_the_same_energies():
    rows = {}
    for n in (1, 4):
        step, state = setup(n, optim.spring())
        rows[n] = run_steps(step, state, 3)[1]
    assert_same_steps(rows[4], rows[1])


def test_walkers_stay_sharded_over_devices():
    step, state = setup(4, optim.adam())
    state, _ = step(state)
    assert len(state.walkers.sharding.device_set) == 4
    assert not state.walkers.sharding.is_fully_replicated


def test_a_nonfinite_local_energy_is_dropped_not_propagated():
    def poisoned(params, r):  # walkers whose first electron has x > 0: nan
        return jnp.where(r[0, 0] > 0, jnp.nan, LOCAL_ENERGY(params, r))

    step, state = setup(4, optim.adam(), local_energy=poisoned)
    state, m = step(state)
    assert m["nonfinite_walkers"] > 0 and np.isfinite(m["energy"]) and m["rejected"] == 0
    assert all(np.all(np.isfinite(x)) for x in jax.tree.leaves(state.params))


def test_an_all_nonfinite_step_is_rejected_and_params_kept():
    step, state = setup(4, optim.adam(), local_energy=lambda p, r: jnp.float32(jnp.inf) * p[
        "layers"][0]["one"]["b"][0])  # fmt: skip
    before = jax.device_get(state.params)
    state, m = step(state)
    assert m["rejected"] == 1
    jax.tree.map(np.testing.assert_array_equal, jax.device_get(state.params), before)


@pytest.mark.parametrize("bad", [jnp.nan, jnp.inf, -jnp.inf])
def test_the_guard_finds_one_nonfinite_entry_in_any_leaf(bad):
    from psijax.training.step import _all_finite

    tree = (NET.init(jax.random.PRNGKey(0)), {"count": jnp.int32(3)})
    assert bool(_all_finite(tree)) and bool(_all_finite(()))
    for i, leaf in enumerate(jax.tree.leaves(tree[0])):
        poisoned = jnp.ravel(leaf).at[-1].set(bad).reshape(leaf.shape)
        leaves = jax.tree.leaves(tree[0])
        leaves[i] = poisoned
        assert not bool(_all_finite((jax.tree.unflatten(jax.tree.structure(tree[0]), leaves),)))


def test_vmc_gradient_estimator_matches_its_formula():
    params = NET.init(jax.random.PRNGKey(0))
    walkers = sampling.init_walkers(jax.random.PRNGKey(1), MOL, 8)
    loss = make_energy_loss(NET.log_abs, LOCAL_ENERGY, clip_scale=None)
    # jitted: run eagerly, every operation of the Laplacian compiles on its own (minutes)
    (_, stats), grad = jax.jit(jax.value_and_grad(loss, has_aux=True))(params, walkers)
    e = jax.jit(map_walkers, static_argnums=0)(LOCAL_ENERGY, params, walkers)
    per_walker = jax.jit(jax.vmap(jax.grad(NET.log_abs), in_axes=(None, 0)))(params, walkers)
    expected = jax.tree.map(
        lambda g: 2 * jnp.mean((e - e.mean()).reshape(-1, *[1] * (g.ndim - 1)) * g, axis=0),
        per_walker,
    )
    for a, b in zip(jax.tree.leaves(grad), jax.tree.leaves(expected), strict=True):
        np.testing.assert_allclose(a, b, rtol=2e-3, atol=2e-5)
    assert_energies_close(stats.energy, e.mean(), e.var(), rtol=1e-6)  # another sum order


def test_lost_walkers_restart_from_a_healthy_one():
    from psijax.sampling import reset_lost_walkers

    walkers = jnp.arange(4 * 2 * 3, dtype=jnp.float32).reshape(4, 2, 3)
    walkers = walkers.at[0, 1, 2].set(jnp.nan)
    log_abs = jnp.array([0.0, -jnp.inf, 1.0, 2.0])
    new, new_log, n = reset_lost_walkers(walkers, log_abs)
    assert int(n) == 2
    np.testing.assert_array_equal(new[0], walkers[2])  # the first healthy walker
    np.testing.assert_array_equal(new[1], walkers[2])
    np.testing.assert_array_equal(new[2:], walkers[2:])
    np.testing.assert_array_equal(new_log, [1.0, 1.0, 1.0, 2.0])
    all_lost = jnp.full_like(walkers, jnp.nan)
    same, _, n = reset_lost_walkers(all_lost, log_abs)
    assert int(n) == 0 and bool(jnp.all(jnp.isnan(same)))


def test_natural_gradient_step_reports_the_vmc_gradient_of_its_walkers():
    """With SPRING the gradient comes from the per-walker jacobian, not a second backward
    pass; it must still be the VMC estimator at the walkers the step sampled."""
    step, state = setup(1, optim.spring())
    params = jax.device_get(state.params)
    state, m = step(state)
    loss = make_energy_loss(NET.log_abs, LOCAL_ENERGY)
    (energy, _), grads = jax.jit(jax.value_and_grad(loss, has_aux=True))(params, state.walkers)
    assert_energies_close(m["energy"], energy, m["variance"], rtol=1e-5)
    np.testing.assert_allclose(m["grad_norm"], optax.tree.norm(grads), rtol=1e-4)


def test_walker_chunks_give_the_same_energies_on_one_and_four_devices():
    """64 walkers in chunks of 32 (on 4 devices: 8 per device, strided over the devices)."""
    rows = {}
    for n in (1, 4):
        config = StepConfig(chunk_size=32)
        step, state = setup(n, optim.spring(), n_walkers=64, config=config)
        rows[n] = run_steps(step, state, 2)[1]
    assert_same_steps(rows[4], rows[1])


def test_strided_chunks_match_vmap_and_keep_the_walker_sharding():
    mesh = parallel.make_mesh(4)
    walkers = jax.device_put(
        sampling.init_walkers(jax.random.PRNGKey(1), MOL, 32), parallel.walker_sharding(mesh)
    )
    params = NET.init(jax.random.PRNGKey(0))
    # In float64: two differently fused float32 programs differ by ~1e-6 (seen: 1.3e-6 on
    # one of 32 walkers), which would hide a wrong walker order no better than rounding.
    with jax.enable_x64(True):
        to64 = lambda tree: jax.tree.map(lambda a: a.astype(jnp.float64), tree)
        chunked = jax.jit(lambda p, w: map_walkers(NET.log_abs, p, w, chunk_size=8))(
            to64(params), to64(walkers)
        )
        plain = map_walkers(NET.log_abs, to64(params), to64(walkers))
        np.testing.assert_allclose(chunked, plain, rtol=1e-12)
    text = (
        jax.jit(lambda p, w: map_walkers(NET.log_abs, p, w, chunk_size=8))
        .lower(params, walkers)
        .compile()
        .as_text()
    )
    assert "all-gather" not in text and "all-to-all" not in text
