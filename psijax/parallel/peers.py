"""A process of a multi-process run is lost: one line, exit code 75, nothing lost.

Once a process of a ``jax.distributed`` job dies or stops answering, the others cannot go
on (JAX's runtime cannot be re-joined): their collectives either fail (a dead peer closes
its connections) or wait forever (a stopped or unreachable peer), and a little later JAX's
coordination service ends every process with a C++ stack dump and exit code 134.
``PeerWatch`` gets there first, on every surviving process, and ends it with one line::

    psijax: error: lost process 1 of 2 (Gloo AllGather failed: Connection closed by peer
    [127.0.0.1]:40410) after step 37; the newest intact checkpoint is step 30; continue
    with: psijax train --resume RUN

(on one line) and exit code ``EXIT_CODE`` (75, ``EX_TEMPFAIL``: try again), so that a
scheduler can requeue the job and resume it. Two triggers:

- a collective fails with a communication error (``lost``, called by the training loop);
- no step completes for ``timeout_s`` seconds (a watchdog thread; ``beat`` marks progress).

JAX's own abort comes at the earliest ``heartbeat_s(timeout_s) / 2`` seconds after a
process stops (its heartbeats go out every half heartbeat timeout), which
``psijax.parallel.distributed.initialize`` makes ``timeout_s + 30`` s: the watchdog always speaks
first. The checkpoints on disk are safe whatever the moment: orbax renames a checkpoint
into place only after every process has written its part.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import threading
import time
from collections.abc import Callable
from typing import NoReturn

EXIT_CODE = 75  # sysexits.h EX_TEMPFAIL: a temporary failure, the job may be retried
DEFAULT_TIMEOUT_S = 120.0
ENV = "PSIJAX_PEER_TIMEOUT"

# Words of the errors a collective raises when its peer is gone (gloo, NCCL, MPI, gRPC).
_COMMUNICATION = re.compile(
    r"connection|peer|socket|gloo|nccl|mpi|collective|heartbeat|barrier|"
    r"unavailable|deadline_exceeded|aborted|broken pipe",
    re.IGNORECASE,
)


def heartbeat_s(timeout_s: float) -> int:
    """JAX's heartbeat timeout for a watchdog of ``timeout_s``: JAX may abort as early as
    half of it after a process stops, 30 s after the watchdog has spoken."""
    return int(2 * timeout_s + 60)


def is_communication_error(err: BaseException) -> bool:
    """Whether ``err`` (a ``jax.errors.JaxRuntimeError``) says a peer is unreachable, as
    opposed to a failure of this process (out of memory, a bad program)."""
    return bool(_COMMUNICATION.search(str(err)))


# An XLA status as an exception's message: how a runtime error reads when JAX hands it on
# as a plain ValueError (multihost_utils.process_allgather inside an orbax save does).
_XLA_STATUS = re.compile(
    r"^(UNKNOWN|UNAVAILABLE|INTERNAL|DEADLINE_EXCEEDED|ABORTED|CANCELLED|FAILED_PRECONDITION): "
)


def runtime_error_in(err: BaseException | None) -> BaseException | None:
    """The JAX runtime error that is ``err`` or caused it (orbax, e.g., wraps one in its
    own ``TimeoutError``), if any; a ValueError that carries an XLA status counts."""
    seen = set()
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        if type(err).__name__ in ("JaxRuntimeError", "XlaRuntimeError"):
            return err
        if isinstance(err, ValueError) and _XLA_STATUS.match(str(err)):
            return err
        err = err.__cause__ or err.__context__
    return None


class PeerWatch:
    """Watches one multi-process loop (training or evaluation); see the module docstring.
    Idle (every method a no-op) for a single process.

    Use as a context manager around the loop, ``arm()`` it when the steps start, ``beat``
    after each completed step, ``check`` each runtime error. ``resume`` is the command that
    continues the run (``psijax train --resume RUN``); ``newest_checkpoint()`` gives
    the newest complete checkpoint step on disk (or None); ``before_exit`` runs just before
    the process ends (e.g. make the metrics rows durable).
    """

    def __init__(
        self,
        resume: str,
        timeout_s: float,
        *,
        process: int,
        processes: int,
        step: int,
        newest_checkpoint: Callable[[], int | None],
        before_exit: Callable[[], None] | None = None,
    ):
        self.resume, self.timeout_s = resume, float(timeout_s)
        self.process, self.processes = process, processes
        self.step = step  # steps completed so far
        self._newest_checkpoint = newest_checkpoint
        self._before_exit = before_exit
        self.enabled = processes > 1
        self._last = time.monotonic()
        self._armed = False
        self._stop = threading.Event()
        self._ending = threading.Lock()
        self._thread = threading.Thread(target=self._watch, name="psijax-peer-watch", daemon=True)

    def __enter__(self) -> PeerWatch:
        if self.enabled:
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def arm(self) -> None:
        """From now on, a step must complete every ``timeout_s`` seconds."""
        self._last = time.monotonic()
        self._armed = True

    def beat(self, step: int) -> None:
        """``step`` steps are complete: the other processes are alive."""
        self.step = step
        self._last = time.monotonic()

    def check(self, err: BaseException) -> None:
        """End the process with the lost-peer line if ``err`` is (or was caused by) a
        communication error of a multi-process run; return otherwise (the caller
        re-raises)."""
        runtime = runtime_error_in(err) if self.enabled else None
        if runtime is not None and is_communication_error(runtime):
            self.lost(cause_of(runtime))

    def lost(self, cause: str, process: int | None = None) -> NoReturn:
        """Report the lost peer (``process`` if known) in one line and end this process."""
        with self._ending:  # the watchdog and the loop may both get here; one line only
            if self._before_exit is not None:
                with contextlib.suppress(Exception):  # the line matters more than the rows
                    self._before_exit()
            line = self.message(cause, process)
            for stream in (sys.stdout, sys.stderr):
                with contextlib.suppress(Exception):  # a closed or broken stream
                    stream.flush()
            lead = "\n" if sys.stderr.isatty() else ""  # off a live progress line
            os.write(2, f"{lead}{line}\n".encode())
            os._exit(EXIT_CODE)

    def message(self, cause: str, process: int | None = None) -> str:
        if process is None and self.processes == 2:
            process = 1 - self.process
        who = (
            f"process {process} of {self.processes}"
            if process is not None and process != self.process
            else f"another process of the {self.processes}"
        )
        try:
            newest = self._newest_checkpoint()
        except Exception:
            newest = None
        saved = (
            f"the newest intact checkpoint is step {newest}"
            if newest is not None
            else "no checkpoint was written yet (the resume starts from the beginning)"
        )
        return (
            f"psijax: error: lost {who} ({cause}) after step {self.step}; {saved}; "
            f"continue with: {self.resume}"
        )

    def _watch(self) -> None:
        poll = min(1.0, self.timeout_s / 10)
        while not self._stop.wait(poll):
            silent = time.monotonic() - self._last
            if self._armed and silent > self.timeout_s:
                self.lost(f"no step completed for {silent:.0f} s; it stopped or hangs")


def cause_of(err: BaseException) -> str:
    """The first line of a communication error, without source locations, kept short."""
    first = (str(err).strip().splitlines() or [type(err).__name__])[0]
    first = re.sub(r"\[[^\]\s]*\.(?:cc|h|cpp):\d+\]\s*", "", first)
    first = re.sub(r"^[A-Z_]+:\s*", "", first)  # the status code (UNKNOWN: ...)
    return first[:140]
