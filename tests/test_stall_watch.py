"""The step watch of a single-process run: a step that stalls ends the run with one line,
exit code 75, the threads' stacks in the run directory and the newest checkpoint intact; a
step that is slow but busy is never called a stall (psijax.run.watch)."""

from __future__ import annotations

import re
import subprocess
import sys
import time

import numpy as np
import pytest

from psijax.run import watch as watch_lib
from psijax.rundir import checkpoint

from runs import TINY


def test_the_bound_follows_the_measured_steps():
    w = watch_lib.StepWatch("resume", 2.0)
    assert w.bound_s() == watch_lib.FIRST * 2.0  # nothing measured: the first step's bound
    w.arm()
    for step, seconds in enumerate([0.05, 0.05, 0.07]):
        w._last -= seconds  # as if the step took that long
        w.beat(step + 1)
    assert w.bound_s() == 2.0  # ten median steps are below the floor
    w._times.extend([1.0] * 10)
    assert w.bound_s() == pytest.approx(watch_lib.FACTOR * 1.0)


BUSY_THEN_IDLE = """
import time
from psijax.run.watch import StepWatch
w = StepWatch("psijax train --resume RUN", 1.0, newest_checkpoint=lambda: 30,
              before_exit=lambda: print("rows flushed"), stacks_dir={out!r},
              cpu_does_the_work=True)
with w:
    w.arm()
    for step in range(1, 21):
        time.sleep(0.02)
        w.beat(step)
    t0 = time.monotonic()
    while time.monotonic() - t0 < 4.0:  # a slow step, busy all along: 4 bounds
        sum(i * i for i in range(10_000))
    w.beat(21)
    print("slow step survived", flush=True)
    print("idle from", time.monotonic(), flush=True)
    time.sleep(30)  # a stalled step: idle
print("not stopped")
"""


def test_a_busy_slow_step_is_not_a_stall_and_an_idle_one_is(tmp_path):
    code = BUSY_THEN_IDLE.format(out=str(tmp_path))
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=120)  # fmt: skip
    ended = time.monotonic()
    assert result.returncode == watch_lib.EXIT_CODE, result.stderr
    lines = result.stdout.splitlines()
    assert "slow step survived" in lines and lines[-1] == "rows flushed"
    assert ended - float(lines[-2].split()[-1]) < 60  # the stacks (gdb) take some seconds
    (line,) = result.stderr.splitlines()
    assert line.startswith("psijax: error: step 22 stalled: not finished after ")
    # the watch spoke after the 1 s bound, once idle for the 1 s floor, polled every 0.1 s
    silent = float(re.search(r"not finished after (\d+) s", line).group(1))
    assert 1 <= silent <= 1 + 1 + 3, line
    assert "10x the median step of 0.02" in line and "the process idle" in line
    assert f"the threads' stacks are in {tmp_path / watch_lib.STACKS}" in line
    assert line.endswith(
        "the newest intact checkpoint is step 30; continue with: psijax train --resume RUN "
        "(if steps are really this slow, raise --stall-timeout)"
    )
    stacks = (tmp_path / watch_lib.STACKS).read_text()
    assert "== Python threads ==" in stacks and "in <module>" in stacks
    assert "== native threads ==" in stacks


# A training run whose eighth step never finishes: its metrics wait on a host callback
# that blocks for ever (the process sits idle, as in XLA's LAPACK deadlock).
STALLED_RUN = """
import threading
import jax
import psijax
from psijax.training import job

never = threading.Event()


def block(x):
    never.wait()
    return x


blocker = jax.jit(lambda x: jax.pure_callback(block, jax.ShapeDtypeStruct(x.shape, x.dtype), x))
make_step = job.make_step


class Stalling:
    def __init__(self, compiled):
        self.compiled, self.calls = compiled, 0
        self.memory_analysis = compiled.memory_analysis  # the job fits the step to memory

    def __call__(self, state):
        state, metrics = self.compiled(state)
        self.calls += 1
        if self.calls == 8:
            metrics = dict(metrics, energy=blocker(metrics["energy"]))
        return state, metrics


class Lowered:
    def __init__(self, lowered):
        self.lowered = lowered

    def compile(self):
        return Stalling(self.lowered.compile())


class Step:
    def __init__(self, step):
        self.step = step

    def lower(self, *args):
        return Lowered(self.step.lower(*args))


job.make_step = lambda *a, **k: Step(make_step(*a, **k))
psijax.train(**{config}, out={out!r}, steps=50, checkpoint_every=3, stall_timeout=2.0,
             progress=False)
print("not stopped")
"""


def _stalled_line(code: str) -> str:
    """Run ``code`` (a job made to stall) in a fresh process; it must end with the watch's
    exit code, and its last line on stderr is returned."""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=300)  # fmt: skip
    assert result.returncode == watch_lib.EXIT_CODE, result.stderr[-3000:]
    assert "not stopped" not in result.stdout
    return result.stderr.strip().splitlines()[-1]


def test_a_stalled_training_step_ends_the_run_with_its_stacks_and_checkpoint(tmp_path):
    run = tmp_path / "run"
    config = {**TINY, "pretrain_steps": 0}
    code = STALLED_RUN.format(config=config, out=str(run))
    line = _stalled_line(code)
    rows = (run / "metrics.csv").read_text().splitlines()
    reported = len(rows) - 1  # the stalled step is the one after the last row
    assert reported in (6, 7)  # the eighth step's dispatch or its metrics never finished
    assert line.startswith(f"psijax: error: step {reported + 1} stalled: not finished after "), line
    assert f"the threads' stacks are in {run / watch_lib.STACKS}" in line
    assert line.endswith(
        f"the newest intact checkpoint is step 6; continue with: psijax train --resume {run} "
        "(if steps are really this slow, raise --stall-timeout)"
    )
    stacks = (run / watch_lib.STACKS).read_text()
    assert "in block" in stacks  # the Python frame of the callback that never returns
    native = stacks.split("== native threads ==")[1]
    assert "Thread" in native or "not available: install gdb or py-spy" in native
    assert checkpoint.newest_complete(run) == 6
    reader = checkpoint.Checkpoints(run, read_only=True)
    try:
        assert reader.latest() == 6
    finally:
        reader.close()
    assert np.isfinite([float(r.split(",")[1]) for r in rows[1:]]).all()


def test_pretraining_and_burn_in_are_phases_of_their_own():
    w = watch_lib.StepWatch("resume", 2.0, step=0)
    w.arm("pretraining", step=25)
    w._last -= 3.0
    w.beat(50)
    assert w._current() == "pretraining step 51" and w._done() == "after pretraining step 50"
    w.arm("burn-in", counted=False)
    assert not w._times  # pretraining's chunk times do not bound the burn-in
    assert w._current() == "burn-in" and w._done() == "during burn-in"
    w.disarm()
    assert not w._armed
    w.arm(step=0)  # the training loop
    assert w._current() == "step 1" and w._done() == 0


# A fresh run whose third pretraining chunk never reports back (the process sits idle).
STALLED_PRETRAINING = """
import threading
import psijax
from psijax.training import pretrain

never = threading.Event()
original = pretrain.pretrain


def stalling(*args, callback=None, **kwargs):
    def blocking(i, loss):
        if i == 2 * pretrain.CHUNK:
            never.wait()
        if callback is not None:
            callback(i, loss)

    return original(*args, callback=blocking, **kwargs)


pretrain.pretrain = stalling
psijax.train(**{config}, out={out!r}, steps=5, stall_timeout=2.0, progress=False)
print("not stopped")
"""


# A fresh run that goes idle in its first pretraining chunk, while nothing is timed (it
# compiles): the watch goes by the idle CPU alone.
IDLE_FIRST_CHUNK = """
import threading
import psijax
from psijax.run import watch
from psijax.training import pretrain

watch.IDLE_WINDOW_S = 3.0
never = threading.Event()
original = pretrain.pretrain


def stalling(*args, callback=None, **kwargs):
    def blocking(i, loss):
        never.wait()  # before the first chunk reports back: nothing is timed yet

    return original(*args, callback=blocking, **kwargs)


pretrain.pretrain = stalling
psijax.train(**{config}, out={out!r}, steps=5, stall_timeout=2.0, progress=False)
print("not stopped")
"""


def test_an_idle_process_while_nothing_is_timed_has_stalled(tmp_path):
    run = tmp_path / "run"
    code = IDLE_FIRST_CHUNK.format(config={**TINY, "pretrain_steps": 50}, out=str(run))
    line = _stalled_line(code)
    assert line.startswith(
        "psijax: error: pretraining's first chunk stalled: the process has been idle for "
    ), line
    assert line.endswith(
        f"no checkpoint was written yet (the resume starts from the beginning); continue "
        f"with: psijax train --resume {run} (if the run waits on something slow, raise "
        "--stall-timeout)"
    ), line
    assert f"the threads' stacks are in {run / watch_lib.STACKS}" in line
    assert "in blocking" in (run / watch_lib.STACKS).read_text()


def test_a_busy_process_while_nothing_is_timed_is_left_alone(monkeypatch):
    """Compiling for longer than the floor is not a stall while the CPU works."""
    monkeypatch.setattr(watch_lib, "IDLE_WINDOW_S", 1.0)
    w = watch_lib.StepWatch("resume", 0.5, cpu_does_the_work=True)
    with w:
        w.disarm("compiling")
        end = time.monotonic() + 3.0
        x = 0
        while time.monotonic() < end:  # busy: a compile
            x += 1
    assert w._doing == "compiling" and not w._armed


def test_a_stalled_pretraining_chunk_ends_the_run_with_one_line(tmp_path):
    run = tmp_path / "run"
    config = {**TINY, "pretrain_steps": 4 * 25}
    code = STALLED_PRETRAINING.format(config=config, out=str(run))
    line = _stalled_line(code)
    assert line.startswith("psijax: error: pretraining step 51 stalled: not finished after "), line
    assert line.endswith(
        "no checkpoint was written yet (the resume starts from the beginning); continue with: "
        f"psijax train --resume {run} "
        "(if steps are really this slow, raise --stall-timeout)"
    ), line
    assert "10x the median chunk of 25 steps of " in line
    assert "in blocking" in (run / watch_lib.STACKS).read_text()
    assert not (run / checkpoint.SUBDIR).exists() or checkpoint.newest_complete(run) is None
