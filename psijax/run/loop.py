"""The one host loop around a jitted step, for training and evaluation alike.

Step ``i + 1`` is dispatched before the metrics of step ``i`` are fetched, so the host never
makes the device wait for logging. Checkpoints are taken every ``every_steps`` steps and
every ``every_minutes`` minutes, and at the end; SIGTERM and SIGINT write one and stop
cleanly (``Interrupted``). A step marks itself rejected (its ``rejected`` metric: training's
update with a non-finite energy, gradient or parameter, an evaluation step without a walker
of finite local energy); ``max_rejected`` rejections in a row stop the run
(``TrainingError``) and leave the last good checkpoint as it was. ``converged`` (the
--target-error rule) may end the run early, with a checkpoint. With several processes every
decision is taken jointly, so all processes save, stop and fail together. ``watch``
(``psijax.run.watch.StepWatch``) ends the run with one line when a step stalls or a
process is lost. Metrics may be scalars (fetched as floats) or per-walker arrays (fetched whole, as
numpy arrays, from every process).
"""

from __future__ import annotations

import dataclasses
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import numpy as np

from psijax import parallel
from psijax.errors import Interrupted, TrainingError
from psijax.parallel.distributed import peer_timeout
from psijax.run.watch import StepWatch
from psijax.rundir import checkpoint
from psijax.types import Metrics, PyTree

# With several processes the stop/save decision costs a collective; take it this often.
SYNC_EVERY = 10


@dataclasses.dataclass(frozen=True)
class CheckpointPolicy:
    """When to checkpoint (how many to keep is ``Checkpoints``' own setting)."""

    every_steps: int = 100  # 0: never by step count
    every_minutes: float = 10.0  # 0: never by time


@dataclasses.dataclass(frozen=True)
class Rejection:
    """What a rejected step means, and what to do when too many come in a row."""

    means: str = "were rejected for non-finite energies, gradients or parameters"
    fix: str = "lower the learning rate or check the molecule, then --resume"


@dataclasses.dataclass
class HostLoop:
    """Runs ``step`` from ``state.step`` up to ``n_steps``; see the module docstring."""

    step: Callable[[PyTree], tuple[PyTree, Metrics]]
    n_steps: int
    on_metrics: Callable[[int, dict[str, Any]], None]
    checkpoints: checkpoint.Checkpoints | None = None
    identity: dict[str, Any] = dataclasses.field(default_factory=dict)
    policy: CheckpointPolicy = CheckpointPolicy()
    max_rejected: int = 20
    rejection: Rejection = Rejection()
    signals: StopSignals | None = None
    watch: StepWatch | None = None
    resume: str = ""  # the command that continues the run, for Interrupted
    before_save: Callable[[], None] | None = None  # e.g. make the metrics rows durable
    # Checked every SYNC_EVERY steps on the metrics so far: a reason to end the run early
    # (e.g. the energy has converged), or None. Only process 0's answer counts.
    converged: Callable[[], str | None] | None = None
    converged_at: int | None = dataclasses.field(default=None, init=False)
    converged_reason: str | None = dataclasses.field(default=None, init=False)

    def run(self, state: PyTree, start: int) -> PyTree:
        if self.watch is not None:
            self.watch.arm(step=start)
        try:
            return self._run(state, start)
        except Interrupted:
            raise
        except Exception as err:
            if self.watch is not None:
                self.watch.check(err)  # a process is gone: one line and exit code 75
            raise

    def _run(self, state: PyTree, start: int) -> PyTree:
        self._rejected_in_a_row = 0
        self._last_save = time.monotonic()
        pending: tuple[int, Metrics] | None = None
        for i in range(start, self.n_steps):
            state, metrics = self.step(state)
            if pending is not None:
                self._emit(*pending)
            pending = (i, metrics)
            done = i + 1
            if self.converged is not None and done % SYNC_EVERY == 0:
                self._emit(*pending)  # the stop rule sees every step so far
                pending = None
            stop, due, converged = self._decide(done)
            if converged and not stop:
                self.converged_at = done
                break
            saved = False
            if stop or due:
                if pending is not None:
                    self._emit(*pending)
                    pending = None
                saved = self._save_if_good(state)
            if stop:
                if self.checkpoints is not None:
                    self.checkpoints.wait()
                raise Interrupted(self.signals.received, done, saved, self.resume)
        if pending is not None:
            self._emit(*pending)
        if start < self.n_steps:
            self._save_if_good(state)
        return state

    def _save_if_good(self, state: PyTree) -> bool:
        """Checkpoint unless the newest steps were rejected (their walkers may be bad)."""
        if self.checkpoints is None or self._rejected_in_a_row:
            return False
        self.save(state)
        return True

    def save(self, state: PyTree) -> None:
        if self.before_save is not None:
            self.before_save()
        if self.checkpoints is not None:
            self.checkpoints.save(state, self.identity)
        self._last_save = time.monotonic()

    def _decide(self, done: int) -> tuple[bool, bool, bool]:
        """(stop now, checkpoint now, converged), the same on every process."""
        by_steps = bool(self.policy.every_steps) and done % self.policy.every_steps == 0
        if self.checkpoints is None:
            by_steps = False
        multi = jax.process_count() > 1
        if multi and done % SYNC_EVERY:  # step counts agree by themselves
            return False, by_steps, False
        minutes = (time.monotonic() - self._last_save) / 60
        by_time = (
            self.checkpoints is not None
            and bool(self.policy.every_minutes)
            and minutes >= self.policy.every_minutes
        )
        stop = self.signals is not None and self.signals.received is not None
        converged = False
        if self.converged is not None and done % SYNC_EVERY == 0 and jax.process_index() == 0:
            self.converged_reason = self.converged()
            converged = self.converged_reason is not None
        if multi:
            stop, by_time, converged = _agree_any(stop, by_time, converged)
        return stop, by_steps or by_time, converged

    def _emit(self, i: int, metrics: Metrics) -> None:
        host = fetch(metrics)
        self.on_metrics(i, host)
        if self.watch is not None:
            self.watch.beat(i + 1)  # a completed step: every process is alive
        self._rejected_in_a_row = self._rejected_in_a_row + 1 if host.get("rejected") else 0
        if self._rejected_in_a_row >= self.max_rejected:
            where = ""
            if self.checkpoints is not None and self.checkpoints.latest() is not None:
                where = f"; the last good checkpoint is step {self.checkpoints.latest()}"
            raise TrainingError(
                f"{self._rejected_in_a_row} steps in a row (up to step {i}) "
                f"{self.rejection.means}{where}; {self.rejection.fix}"
            )


def fetch(metrics: Metrics) -> dict[str, Any]:
    """One step's metrics on the host: scalars as floats, per-walker arrays whole (a
    collective where they are split over processes)."""
    scalars = {k: v for k, v in metrics.items() if np.ndim(v) == 0}
    host: dict[str, Any] = {k: float(v) for k, v in jax.device_get(scalars).items()}
    for k, v in metrics.items():
        if k not in host:
            host[k] = parallel.to_host(v)
    return {k: host[k] for k in metrics}


def step_watch(out: Path, start: int, before_exit, resume: str, stall_timeout: float) -> StepWatch:
    """The watch over the steps of a run in ``out`` (``psijax.run.watch``): its floor is
    ``stall_timeout`` for one process, the peer timeout for several; ``resume`` is the
    command that continues the run."""
    multi = jax.process_count() > 1
    return StepWatch(
        resume,
        peer_timeout() if multi else stall_timeout,
        process=jax.process_index(),
        processes=jax.process_count(),
        step=start,
        newest_checkpoint=lambda: checkpoint.newest_complete(out),
        before_exit=before_exit,
        stacks_dir=out,
        cpu_does_the_work=jax.default_backend() == "cpu",
    )


def run_steps(
    step: Callable[[PyTree], tuple[PyTree, Metrics]], state: PyTree, n_steps: int
) -> tuple[PyTree, list[dict[str, Any]]]:
    """``n_steps`` steps with no checkpoints or signals: the last state and every step's
    metrics on the host (fetched one step late, as in a run)."""
    rows: list[dict[str, float]] = []
    loop = HostLoop(step, n_steps, on_metrics=lambda i, m: rows.append(m), max_rejected=n_steps + 1)
    return loop.run(state, 0), rows


def _agree_any(*flags: bool) -> tuple[bool, ...]:
    """Each flag OR-ed over all processes (a collective: every process must call it)."""
    from jax.experimental import multihost_utils

    local = np.asarray(flags, np.int32)
    every = np.asarray(multihost_utils.process_allgather(local))
    return tuple(bool(x) for x in every.reshape(-1, len(flags)).any(axis=0))


class StopSignals:
    """Records SIGTERM/SIGINT instead of dying; a second one stops at once.

    Use as a context manager around the work; handlers are installed only in the main
    thread and the previous ones are restored on exit.
    """

    SIGNALS = (signal.SIGTERM, signal.SIGINT)

    def __init__(self) -> None:
        self.received: int | None = None
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> StopSignals:
        if threading.current_thread() is threading.main_thread():
            for sig in self.SIGNALS:
                self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous.clear()

    def _handle(self, signum: int, frame) -> None:
        if self.received is not None:  # second signal: give up waiting for the checkpoint
            raise KeyboardInterrupt
        self.received = signum
