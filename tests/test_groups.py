"""The training step in walker groups (psijax.training.execution) is the one-program step:
the same moves, energies, update and metrics, and it is chosen only where it applies."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from test_step import LOCAL_ENERGY, MOL, NET, assert_same_steps, setup

from psijax import optim, parallel, sampling
from psijax.sampling.metropolis import metropolis
from psijax.training import execution
from psijax.training import step as step_lib
from psijax.training.step import StepConfig

from close import column


def _run(step, state, n):
    metrics = []
    for _ in range(n):
        state, m = step(state)
        metrics.append(jax.device_get(m))
    return jax.device_get(state), metrics


CPU_ONLY = "walker groups run on a CPU device only (group_count); a GPU's step is one program"


def _same_steps(local_energy, n_walkers=16, steps=3):
    if jax.default_backend() != "cpu":
        pytest.skip(CPU_ONLY)
    runs = {}
    for k in (1, 2):
        config = StepConfig(groups=k)
        step, state = setup(1, optim.spring(), local_energy, n_walkers=n_walkers, config=config)
        assert isinstance(step, execution.ThreadGroups) == (k == 2)
        runs[k] = _run(step, state, steps)
    (one, m1), (two, m2) = runs[1], runs[2]
    # one program and two groups sum in other orders: the mean energy (which can be near
    # 0 Ha) to the local energies' spread, the positive quantities to their own size
    assert_same_steps(m2, m1, rtol=2e-5)
    for name in ("variance", "acceptance", "width", "grad_norm"):
        np.testing.assert_allclose(column(m2, name), column(m1, name), rtol=2e-5, err_msg=name)
    np.testing.assert_allclose(two.walkers, one.walkers, atol=1e-5)
    np.testing.assert_allclose(two.log_abs, one.log_abs, rtol=1e-5, atol=1e-5)
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, atol=1e-5), two.params, one.params)
    assert int(two.step) == int(one.step) == steps
    np.testing.assert_array_equal(jax.random.key_data(two.key), jax.random.key_data(one.key))


@pytest.mark.compat
def test_two_groups_take_the_one_program_steps():
    _same_steps(LOCAL_ENERGY)


class _Noisy:
    """A local energy that draws (as the ECP's quadrature does): E_L + 0.01 N(0, 1)."""

    needs_key = True

    def __call__(self, params, r, key):
        return LOCAL_ENERGY(params, r) + 0.01 * jax.random.normal(key, ())


def test_a_local_energy_that_draws_gets_each_walker_its_own_key_as_in_one_program():
    _same_steps(_Noisy())


def test_rows_draw_the_whole_batch_random_numbers():
    walkers = sampling.init_walkers(jax.random.PRNGKey(1), MOL, 8)
    log_abs = jax.vmap(NET.log_abs, in_axes=(None, 0))
    params = NET.init(jax.random.PRNGKey(0))
    batch = lambda w: log_abs(params, w)
    key, width = jax.random.PRNGKey(3), jnp.float32(0.2)
    whole = metropolis(key, batch, walkers, batch(walkers), width, 4)
    for offset in (0, 4):
        part = walkers[offset : offset + 4]
        got = metropolis(key, batch, part, batch(part), width, 4, rows=(jnp.int32(offset), 8))
        np.testing.assert_allclose(got[0], whole[0][offset : offset + 4], atol=1e-6)


def _count(monkeypatch, cores, n_devices=1, optimizer=None, sampler=None, **settings):
    monkeypatch.setattr(step_lib, "cores", lambda: cores)
    optimizer = optimizer or optim.spring()
    _, state = setup(n_devices, optimizer, n_walkers=16)
    mesh = parallel.make_mesh(n_devices)
    sampler = sampler or sampling.Metropolis(2)
    needs = optim.needs_of(optimizer)
    return step_lib.group_count(StepConfig(**settings), mesh, state, sampler, needs)


def test_groups_are_chosen_on_one_cpu_device_with_two_cores_for_spring_only(monkeypatch):
    if jax.default_backend() != "cpu":
        pytest.skip(CPU_ONLY)
    assert _count(monkeypatch, cores=2) == step_lib.GROUPS
    assert _count(monkeypatch, cores=1) == 1
    assert _count(monkeypatch, cores=2, n_devices=2) == 1
    assert _count(monkeypatch, cores=2, optimizer=optim.adam()) == 1
    assert _count(monkeypatch, cores=2, jacobian_blocks=2) == 1
    assert _count(monkeypatch, cores=2, groups=1) == 1


def test_groups_asked_for_where_they_cannot_apply_are_refused(monkeypatch):
    with pytest.raises(ValueError, match="groups=2 needs one device"):
        _count(monkeypatch, cores=2, optimizer=optim.adam(), groups=2)
    with pytest.raises(ValueError, match="does not divide"):
        _count(monkeypatch, cores=2, groups=3)


def test_a_grouped_step_never_recompiles_and_reports_its_memory():
    if jax.default_backend() != "cpu":
        pytest.skip(CPU_ONLY)
    step, state = setup(1, optim.spring(), config=StepConfig(groups=2))
    compiled = step.lower(state).compile()
    plan = compiled.memory_analysis()
    assert plan.temp_size_in_bytes > 0 and plan.output_size_in_bytes > 0
    for _ in range(3):  # ahead-of-time programs: a changed input would raise, not recompile
        state, _ = compiled(state)
    state, _ = step(state)
    first = step._compiled
    state, _ = step(state)
    assert step._compiled is first
