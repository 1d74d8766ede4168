"""The training loop around the jitted step: metrics one step late, checkpoints, signals, faults.

Step ``i + 1`` is dispatched before the metrics of step ``i`` are fetched, so the host never
makes the device wait for logging. Checkpoints are taken every ``every_steps`` steps and
every ``every_minutes`` minutes, and at the end; SIGTERM and SIGINT write one and stop
cleanly (``Interrupted``). A step whose energy, gradient or parameters are not finite is
rejected inside the step; ``max_rejected`` rejections in a row stop the run
(``TrainingError``) and leave the last good checkpoint as it was. ``converged`` (e.g. the
--target-error rule) may end the run early, with a checkpoint. With several processes
every decision is taken jointly, so all processes save, stop and fail together.
"""

from __future__ import annotations

import dataclasses
import signal
import threading
import time
from collections.abc import Callable
from typing import Any

import jax
import numpy as np

from psijax.errors import PsijaxError
from psijax.run.checkpoint import Checkpoints
from psijax.run.step import Metrics
from psijax.types import TrainState

# With several processes the stop/save decision costs a collective; take it this often.
SYNC_EVERY = 10


class TrainingError(PsijaxError):
    """Training cannot go on (e.g. every update is rejected). The CLI exits with code 3."""


class Interrupted(PsijaxError):
    """SIGTERM or SIGINT arrived; a checkpoint at ``step`` was written (if ``saved``)."""

    def __init__(self, signum: int, step: int, saved: bool):
        self.signum, self.step, self.saved = signum, step, saved
        self.out = "DIR"  # the run directory, filled in by psijax.run.train.train
        name = signal.Signals(signum).name
        what = (
            f"checkpoint written at step {step}"
            if saved
            else "no checkpoint written (none configured, or the newest steps were rejected)"
        )
        super().__init__(f"{name} received: {what}")


@dataclasses.dataclass(frozen=True)
class CheckpointPolicy:
    every_steps: int = 100  # 0: never by step count
    every_minutes: float = 10.0  # 0: never by time
    keep: int = 3


@dataclasses.dataclass
class HostLoop:
    """Runs ``step`` from ``state.step`` up to ``n_steps``; see the module docstring."""

    step: Callable[[TrainState], tuple[TrainState, Metrics]]
    n_steps: int
    on_metrics: Callable[[int, dict[str, float]], None]
    checkpoints: Checkpoints | None = None
    identity: dict[str, Any] = dataclasses.field(default_factory=dict)
    policy: CheckpointPolicy = CheckpointPolicy()
    max_rejected: int = 20
    signals: StopSignals | None = None
    before_save: Callable[[], None] | None = None  # e.g. make the metrics rows durable
    # Checked every SYNC_EVERY steps on the metrics so far: a reason to end the run early
    # (e.g. the energy has converged), or None. Only process 0's answer counts.
    converged: Callable[[], str | None] | None = None
    converged_at: int | None = dataclasses.field(default=None, init=False)
    converged_reason: str | None = dataclasses.field(default=None, init=False)

    def run(self, state: TrainState, start: int) -> TrainState:
        self._rejected_in_a_row = 0
        self._last_save = time.monotonic()
        pending: tuple[int, Metrics] | None = None
        for i in range(start, self.n_steps):
            state, metrics = self.step(state)
            if pending is not None:
                self._emit(*pending)
            pending = (i, metrics)
            done = i + 1
            stop, due, converged = self._decide(done)
            if converged and not stop:
                self.converged_at = done
                break
            saved = False
            if stop or due:
                self._emit(*pending)
                pending = None
                saved = self._save_if_good(state)
            if stop:
                if self.checkpoints is not None:
                    self.checkpoints.wait()
                raise Interrupted(self.signals.received, done, saved)
        if pending is not None:
            self._emit(*pending)
        if start < self.n_steps:
            self._save_if_good(state)
        return state

    def _save_if_good(self, state: TrainState) -> bool:
        """Checkpoint unless the newest steps were rejected (their walkers may be bad)."""
        if self.checkpoints is None or self._rejected_in_a_row:
            return False
        self.save(state)
        return True

    def save(self, state: TrainState) -> None:
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
        host = {k: float(v) for k, v in jax.device_get(metrics).items()}
        self.on_metrics(i, host)
        self._rejected_in_a_row = self._rejected_in_a_row + 1 if host.get("rejected") else 0
        if self._rejected_in_a_row >= self.max_rejected:
            where = ""
            if self.checkpoints is not None and self.checkpoints.latest() is not None:
                where = f"; the last good checkpoint is step {self.checkpoints.latest()}"
            raise TrainingError(
                f"{self._rejected_in_a_row} steps in a row (up to step {i}) were rejected for "
                f"non-finite energies, gradients or parameters{where}; lower the learning "
                "rate or check the molecule, then --resume"
            )


def run_steps(
    step: Callable[[TrainState], tuple[TrainState, Metrics]], state: TrainState, n_steps: int
) -> tuple[TrainState, list[dict[str, float]]]:
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
