"""The training step within the device's memory (psijax.training.memory): a plan that does
not fit is compiled again with smaller walker chunks and more jacobian blocks, the step
taken is the same, settings the user gave are kept, and what cannot fit is one line."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import psijax
from psijax import config as config_lib
from psijax import hamiltonian, parallel, registry, sampling, system
from psijax.errors import InputError
from psijax.training import memory
from psijax.training.job import step_config
from psijax.training.state import train_state
from psijax.training.step import StepConfig, make_step

from close import assert_energies_close, column
from eval_runs import trained_run
from runs import TINY, metrics

MIB = 2**20


def test_the_jacobian_goes_into_blocks_and_the_rest_into_chunks():
    plan = memory.Plan(fixed=1 * MIB, temporary=900 * MIB)
    settings = StepConfig()
    fit = dict(walkers=4096, devices=1, n_params=10_000, jacobian=True)  # 3 x 156 MiB
    new = memory.smaller(plan, 400 * MIB, settings, **fit)
    assert new.jacobian_blocks == 3  # 469 MiB in three blocks: under half the 399 MiB room
    assert new.chunk_size == 32  # the rest (431 MiB at the automatic 64) scaled by 243 / 431
    assert memory.smaller(plan, 400 * MIB, settings, **{**fit, "jacobian": False}) == (
        dataclasses.replace(settings, chunk_size=16)  # 399 / 900 of 64 walkers, rounded down
    )
    kept = frozenset({"chunk_size", "jacobian_blocks"})
    assert memory.smaller(plan, 400 * MIB, settings, **fit, kept=kept) is None
    assert memory.smaller(plan, MIB // 2, settings, **fit) is None  # not even the state fits
    fitting = memory.smaller(plan, 2000 * MIB, settings, **fit)
    assert fitting is None  # it fits already: nothing to change


def test_a_jacobian_that_cannot_fit_goes_into_blocks_before_the_first_compilation():
    """Ne at FermiNet's production sizes (4,096 walkers, 729,952 parameters): SPRING's
    jacobian alone is 3 x 12 GB; with 16 GiB to be had the first compilation already
    forms it in blocks, and it is told; the user's own jacobian_blocks are kept."""
    fit = dict(walkers=4096, devices=1, n_params=729_952, jacobian=True)
    budget = 16 * 2**30
    assert memory.first_guess(StepConfig(), budget, **fit).jacobian_blocks == 5  # 33.4 / 8 GiB
    assert memory.first_guess(StepConfig(), budget, **{**fit, "devices": 8}) == StepConfig()
    assert memory.first_guess(StepConfig(), None, **fit) == StepConfig()
    kept = frozenset({"jacobian_blocks"})
    assert memory.first_guess(StepConfig(), budget, **fit, kept=kept) == StepConfig()

    built, notes = [], []

    class Compiled:
        def memory_analysis(self):  # a plan that fits: nothing compiled again
            return type(
                "Analysis",
                (),
                dict(
                    argument_size_in_bytes=MIB,
                    output_size_in_bytes=MIB,
                    alias_size_in_bytes=MIB,
                    temp_size_in_bytes=MIB,
                ),
            )

    class Lowered:
        def compile(self):
            return Compiled()

    class Built:
        def lower(self, template):
            return Lowered()

    def build(settings):
        built.append(settings)
        return Built()

    config = config_lib.from_dict({**TINY, "walkers": 4096})
    params = {"w": jax.ShapeDtypeStruct((729_952,), jnp.float32)}
    template = type("State", (), {"params": params})
    _, fitted = memory.compile_within(
        build, StepConfig(), template, budget, config=config, mesh=parallel.make_mesh(1),
        optimizer=registry.optimizer(config), note=notes.append,
    )  # fmt: skip
    assert [s.jacobian_blocks for s in built] == [5] and fitted.jacobian_blocks == 5
    assert notes == ["SPRING's jacobian alone needs about 33.4 GiB per device, more than half "
                     "of the 16.0 GiB that can be had: compiling the training step with "
                     "jacobian_blocks 5"]  # fmt: skip


SMALL = {**TINY, "walkers": 64, "layers": [[16, 4]], "determinants": 2}


def _tiny_step():
    config = config_lib.from_dict(SMALL)
    molecule = system.for_config(config)
    mesh = parallel.make_mesh(1)
    net = registry.ansatz(molecule, config)
    optimizer = registry.optimizer(config)
    sampler = registry.sampler(config, molecule)
    local_energy = hamiltonian.for_config(molecule, config).local_energy(net)
    keys = jax.random.split(jax.random.PRNGKey(3), 3)
    params = net.init(keys[0], jnp.float32)
    walkers = sampling.init_walkers(keys[1], molecule, config.walkers)
    walkers = jax.device_put(walkers, parallel.walker_sharding(mesh))
    state = train_state(net, optimizer, params, walkers, keys[2], mesh=mesh)

    def build(settings):
        return make_step(net.log_abs, local_energy, optimizer, settings, mesh, state, sampler)

    return config, mesh, optimizer, state, build


def test_a_step_that_does_not_fit_is_compiled_again_smaller_and_takes_the_same_step():
    config, mesh, optimizer, state, build = _tiny_step()
    # one program, as the blocked step is: walker groups (tests/test_groups.py) would take
    # the same step only to float32 round-off
    settings = dataclasses.replace(step_config(config), groups=1)
    first = build(settings).lower(state).compile()
    budget = memory.Plan.of(first).total // 2
    notes = []
    compiled, fitted = memory.compile_within(
        build, settings, state, budget, config=config, mesh=mesh, optimizer=optimizer,
        note=notes.append,
    )  # fmt: skip
    assert fitted != settings and memory.Plan.of(compiled).total <= budget
    # its jacobian is blocked before the first compilation, its chunk after it
    assert notes[0].startswith("SPRING's jacobian alone needs about ")
    assert notes[-1].startswith("the training step plans ")
    assert f"jacobian_blocks {fitted.jacobian_blocks}" in notes[-1]
    copy = lambda s: jax.tree.map(jnp.copy, s)  # the steps donate their state
    a, metrics_a = first(copy(state))
    b, metrics_b = compiled(copy(state))
    assert_energies_close(metrics_b["energy"], metrics_a["energy"], metrics_a["variance"],
                          rtol=1e-6)  # fmt: skip
    for x, y in zip(jax.tree.leaves(a.params), jax.tree.leaves(b.params), strict=True):
        np.testing.assert_allclose(x, y, rtol=2e-4, atol=2e-6)


def test_settings_the_user_gave_are_kept_and_a_misfit_is_one_line():
    config, mesh, optimizer, state, build = _tiny_step()
    config = dataclasses.replace(config, chunk_size=16, jacobian_blocks=2)
    settings = step_config(config)
    plan = memory.Plan.of(build(settings).lower(state).compile())
    with pytest.raises(InputError) as err:
        memory.compile_within(
            build, settings, state, plan.total // 2, config=config, mesh=mesh,
            optimizer=optimizer,
        )  # fmt: skip
    (line,) = str(err.value).splitlines()
    assert (
        line.startswith("the training step needs ") and "(chunk_size 16, jacobian_blocks 2)" in line
    )
    assert line.endswith("set a smaller --chunk-size, more --jacobian-blocks, fewer --walkers "
                         "or more --devices")  # fmt: skip


def test_a_run_fits_its_step_to_the_memory_it_is_given(tmp_path, monkeypatch, capsys):
    config, _, _, state, build = _tiny_step()
    plan = memory.Plan.of(build(step_config(config)).lower(state).compile())
    monkeypatch.setattr(memory, "budget", lambda: plan.total // 2)
    result = psijax.train(**SMALL, devices=1, steps=3, out=str(tmp_path / "run"))
    assert np.isfinite(result.energies).all()
    shown = capsys.readouterr()
    assert "can be had: compiling it again with chunk_size" in shown.err + shown.out


def test_the_free_memory_is_known_on_this_machine():
    free = memory.free_bytes()
    assert free is not None and free > 0
    assert 0 < memory.budget() < free  # a fraction of it


def test_an_evaluation_fits_its_step_to_the_memory_it_is_given(tmp_path, monkeypatch, capsys):
    run = trained_run(tmp_path)
    plans = []
    plan_of = memory.Plan.of
    monkeypatch.setattr(memory.Plan, "of", lambda c: plans.append(plan_of(c)) or plans[-1])
    settings = dict(steps=3, walkers=256, burn_in=2, devices=1, observables="energy")
    first = psijax.evaluate(run, **settings)
    assert len(plans) == 1  # it fitted: compiled once
    monkeypatch.setattr(memory, "budget", lambda: plans[0].total // 2)
    result = psijax.evaluate(run, **settings, force=True)
    variance = column(metrics(first.out), "variance")  # the same steps, in chunks:
    assert_energies_close(result.energies, first.energies, variance, rtol=1e-5)
    assert plans[-1].total <= plans[0].total // 2 < plans[1].total
    shown = capsys.readouterr()
    assert "the evaluation step plans " in shown.err + shown.out


def test_on_a_gpu_the_lines_say_how_to_give_jax_more_memory():
    from psijax.training.memory import more_memory

    assert "XLA_PYTHON_CLIENT_MEM_FRACTION=0.9" in more_memory("gpu", {})
    assert more_memory("gpu", {"XLA_PYTHON_CLIENT_MEM_FRACTION": "0.5"}) == ""  # the user's
    assert more_memory("cpu", {}) == ""
