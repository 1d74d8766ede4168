"""One job's run on the host, for training and evaluation alike.

A job (``psijax.training.job``, ``psijax.evaluation.job``) checks its inputs and builds its
state and step; ``RunContext`` then owns everything that writes or watches while it runs:
the lock on the output directory (``psijax.rundir.lock``: one writer at a time), the
job's metrics writer, its checkpoints, the step watch (a stall or a lost process ends the
run with one line, ``psijax.run.watch``), SIGTERM/SIGINT (a checkpoint, then a clean stop)
and the progress display, each closed on every way out. The job supplies its state, its
step and what it does with each step's metrics (``loop``), and reads its results after.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Protocol

from psijax.run.loop import CheckpointPolicy, HostLoop, Rejection, StopSignals, step_watch
from psijax.run.watch import StepWatch
from psijax.rundir import checkpoint, lock
from psijax.types import Metrics, PyTree


class Writer(Protocol):
    """A job's files: rows as they come, durable at ``flush``, closed at ``close``."""

    def flush(self) -> None: ...

    def close(self) -> None: ...


class Display(Protocol):
    def close(self) -> None: ...


@dataclasses.dataclass(frozen=True)
class RunFiles:
    """Where and how a job writes: its directory, the lock's wording and its resume."""

    out: Path
    what: str  # the job in the lock's error: "training run in 'runs/lih'"
    resume: str  # the command that continues the job
    keep: int  # checkpoints kept
    stall_timeout: float  # the step watch's floor (seconds; 0: no watch)
    lock_fix: str = "or choose another --out"
    unwritable: str = "choose another --out"


@dataclasses.dataclass
class RunContext:
    """What one job holds while it runs (from ``running``): its ``writer``, its
    ``checkpoints``, the ``watch`` and the stop ``signals``."""

    files: RunFiles
    writer: Any
    checkpoints: checkpoint.Checkpoints
    watch: StepWatch
    signals: StopSignals

    def loop(
        self,
        step: Callable[[PyTree], tuple[PyTree, Metrics]],
        n_steps: int,
        on_metrics: Callable[[int, dict[str, Any]], None],
        *,
        identity: dict[str, Any],
        every_steps: int,
        every_minutes: float = 10.0,
        max_rejected: int = 20,
        rejection: Rejection | None = None,
        converged: Callable[[], str | None] | None = None,
    ) -> HostLoop:
        """The host loop over ``step`` with this run's checkpoints, signals and watch."""
        return HostLoop(
            step=step,
            n_steps=n_steps,
            on_metrics=on_metrics,
            checkpoints=self.checkpoints,
            identity=identity,
            policy=CheckpointPolicy(every_steps, every_minutes),
            max_rejected=max_rejected,
            rejection=rejection or Rejection(),
            signals=self.signals,
            watch=self.watch,
            resume=self.files.resume,
            before_save=self.writer.flush,
            converged=converged,
        )


@contextlib.contextmanager
def running(
    files: RunFiles, start: int, make_writer: Callable[[], Writer], show: Display, *, lead: bool
) -> Iterator[RunContext]:
    """Hold ``files.out``'s lock, open the writer ``make_writer()`` (inside the lock: it may
    replace an old job's files), the checkpoints, the watch from step ``start`` and the
    stop signals; close the display ``show``, the writer and the checkpoints on every way
    out. Only ``lead`` (process 0) locks and writes."""
    with lock.holding(
        files.out / lock.NAME, files.what, fix=files.lock_fix, unwritable=files.unwritable,
        enabled=lead,
    ):  # fmt: skip
        writer = checkpoints = None
        try:
            writer = make_writer()
            checkpoints = checkpoint.Checkpoints(files.out, keep=files.keep)
            watch = step_watch(files.out, start, writer.flush, files.resume, files.stall_timeout)
            with StopSignals() as signals, watch:
                yield RunContext(files, writer, checkpoints, watch, signals)
        finally:
            show.close()
            if writer is not None:
                writer.close()
            if checkpoints is not None:
                checkpoints.close()
