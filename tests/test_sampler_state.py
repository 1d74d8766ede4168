"""A sampler's state is any pytree: a sampler whose state is two arrays (its width and a
count of its steps) trains, runs in walker groups, checkpoints, resumes, evaluates and
loads through one registry entry, with nothing else changed."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import psijax
from psijax import registry
from psijax.registry import Entry
from psijax.sampling.metropolis import Metropolis

from runs import TINY


@dataclasses.dataclass(frozen=True)
class Counting:
    """Metropolis moves; its state is ``{"width": w, "steps": n}``, ``n`` counting the steps
    it has taken (its adaptation stops with ``adapt``, its count does not)."""

    inner: Metropolis

    def init(self, dtype=jnp.float32):
        return {"width": self.inner.init(dtype), "steps": jnp.zeros((), dtype)}

    def width(self, state):
        return state["width"]

    def merge(self, states):
        return {"width": self.inner.merge([s["width"] for s in states]),
                "steps": states[0]["steps"]}  # fmt: skip

    def step(self, key, log_abs, walkers, log_abs_walkers, state, rows=None):
        walkers, log_abs_walkers, width, stats = self.inner.step(
            key, log_abs, walkers, log_abs_walkers, state["width"], rows=rows
        )
        return walkers, log_abs_walkers, {"width": width, "steps": state["steps"] + 1}, stats


def counting(config, molecule, **settings):
    return Counting(Metropolis(**{"n_moves": config.mcmc_moves, **settings}))


@pytest.fixture
def toy(monkeypatch):
    monkeypatch.setitem(registry.SAMPLERS, "counting", Entry(counting))


def test_a_sampler_with_a_two_array_state_trains_resumes_evaluates_and_loads(tmp_path, toy):
    out = tmp_path / "run"
    settings = {**TINY, "sampler": "counting", "progress": False}
    first = psijax.train(**settings, steps=4, checkpoint_every=2, out=str(out))
    assert np.isfinite(first.energies).all()
    resumed = psijax.train(out=str(out), resume=True, steps=6, progress=False)
    assert len(resumed.energies) == 6

    wf = psijax.load(out, devices=1)
    state = wf.sampler_state
    assert sorted(state) == ["steps", "width"]
    # burn-in's own steps (the last ADAPT_STEPS of TINY's 3), then one per training step,
    # counted across the resume: the state was checkpointed and restored whole
    assert float(state["steps"]) == TINY["burn_in_steps"] + 6
    assert float(state["width"]) > 0
    assert wf.sample(2).shape == wf.walkers.shape

    result = psijax.evaluate(out, steps=4, burn_in=2, devices=1, progress=False)
    assert np.isfinite(result.energies).all()
    assert result.summary["width"] > 0


def test_a_two_array_state_runs_in_walker_groups_like_one_program(toy):
    from test_step import LOCAL_ENERGY, NET, setup

    from psijax import optim
    from psijax.run.loop import run_steps
    from psijax.training import execution
    from psijax.training.step import StepConfig, make_step

    if jax.default_backend() != "cpu":
        pytest.skip("walker groups run on a CPU device only")
    sampler = Counting(Metropolis(2))
    runs = {}
    for k in (1, 2):
        _, state = setup(1, optim.spring())
        state = state._replace(sampler=sampler.init(jnp.float32))
        step = make_step(NET.log_abs, LOCAL_ENERGY, optim.spring(), StepConfig(groups=k),
                         psijax.parallel.make_mesh(1), state, sampler)  # fmt: skip
        assert isinstance(step, execution.ThreadGroups) == (k == 2)
        runs[k] = run_steps(step, state, 3)
    (one, rows_1), (two, rows_2) = runs[1], runs[2]
    assert float(two.sampler["steps"]) == float(one.sampler["steps"]) == 3
    np.testing.assert_allclose(two.sampler["width"], one.sampler["width"], rtol=1e-5)
    np.testing.assert_allclose([m["width"] for m in rows_2], [m["width"] for m in rows_1],
                               rtol=1e-5)  # fmt: skip
