"""A first launch compiles pretraining's and burn-in's programs before the training step.

XLA's CPU client queues a program's code generation behind any other under way: had the
step's compile (in the background, minutes for large molecules) started first, pretraining
and burn-in would wait for all of it before their first step (psijax.training.start).
"""

from __future__ import annotations

import contextlib
import logging
import threading

import jax
import pytest

import psijax
from psijax.training import memory, start
from tests.runs import TINY

pytestmark = pytest.mark.compat


class _Events(logging.Handler):
    """The names of the programs whose compile finished, in order, with the gate's opening."""

    def __init__(self):
        super().__init__(logging.WARNING)
        self.events: list[str] = []
        self.guard = threading.Lock()

    def emit(self, record):
        message = record.getMessage()
        if message.startswith("Finished XLA compilation of jit("):
            with self.guard:
                self.events.append(message.split("jit(")[1].split(")")[0])


@contextlib.contextmanager
def _compile_log():
    """``_Events`` of the compiles within, from JAX's compile log."""
    events = _Events()
    logger = logging.getLogger("jax._src.dispatch")
    logger.addHandler(events)
    previous = jax.config.jax_log_compiles
    jax.config.update("jax_log_compiles", True)
    try:
        yield events
    finally:
        jax.config.update("jax_log_compiles", previous)
        logger.removeHandler(events)


def test_pretraining_and_burn_in_compile_before_the_training_step(tmp_path, monkeypatch):
    fresh_state, compile_within = start.fresh_state, memory.compile_within

    def recorded_fresh_state(*args, compiled, **kwargs):
        def opened():
            with events.guard:
                events.events.append("GATE")
            compiled()

        return fresh_state(*args, compiled=opened, **kwargs)

    def recorded_compile_within(*args, wait, **kwargs):
        def waited():
            wait()
            with events.guard:
                events.events.append("STEP")

        return compile_within(*args, wait=waited, **kwargs)

    monkeypatch.setattr(start, "fresh_state", recorded_fresh_state)
    monkeypatch.setattr(memory, "compile_within", recorded_compile_within)
    with _compile_log() as events:
        psijax.train(**TINY, steps=2, out=tmp_path / "run", progress=False)
    got = events.events
    assert got.count("GATE") == 1 and got.count("STEP") == 1, got
    gate, step = got.index("GATE"), got.index("STEP")
    # pretraining's chunk and burn-in's program (both named run) before the gate, none after
    assert got[:gate].count("run") == 2, got
    assert "run" not in got[gate:], got
    assert gate < step, got
    # the step compiles only once the gate is open (one program, or groups and combine)
    assert not {"step", "group", "_combine"} & set(got[:step]), got


def test_a_failed_start_does_not_wait_for_the_training_steps_compile(tmp_path, monkeypatch):
    def failing(*args, **kwargs):
        raise RuntimeError("Hartree-Fock failed")

    monkeypatch.setattr(start.scf, "hartree_fock", failing)
    with _compile_log() as events, pytest.raises(RuntimeError, match="Hartree-Fock failed"):
        psijax.train(**TINY, steps=2, out=tmp_path / "run", progress=False)
    assert not {"step", "group", "_combine"} & set(events.events), events.events


def test_the_start_compiles_no_operation_per_parameter(tmp_path):
    """The optimisers' initial states are one program each and pretraining's envelope
    exponents are set on the host: run one operation at a time they were about twenty
    compiles of 20-40 ms, several of them queued behind the training step's."""
    jax.clear_caches()  # as in a new process: operations run before compile again
    with _compile_log() as events:
        psijax.train(**TINY, steps=2, out=tmp_path / "run", progress=False)
    single = {"broadcast_in_dim", "reshape", "concatenate", "tile"} & set(events.events)
    assert not single, events.events
