"""The watch over a run's steps: a step that stalls, or a lost process, ends the run with
one line, exit code 75, and nothing lost.

A watchdog thread measures the time since the last completed step: a training or
evaluation step, a chunk of pretraining steps, or the whole burn-in (``arm`` names the
phase; each phase's times are its own). What compiles is compiled before the clock runs
(the step before the loop, the burn-in before it is armed) or not timed (pretraining's
first chunk), so the clock times execution only. The bound is ``FACTOR`` times
the median of the recent step times, never below the floor (``stall_timeout``, or
``--peer-timeout`` with several processes); before the first step has completed nothing is
measured and the bound is ``FIRST`` floors. While nothing is timed (``disarm``: compiling,
pretraining's first chunk), a single process on a CPU that has been idle for the floor (at
least ``IDLE_WINDOW_S``) has stalled too: compiling keeps a core busy, a deadlock does
not. Past the bound:

- **one process**: a stall. On a CPU, where this process's own threads do the work, a
  step that is still using CPU is slow, not stalled, and the watch keeps waiting; it speaks
  once the process has been idle (below ``IDLE_CPU`` of a core) for ``IDLE_WINDOW_S``
  (or the floor, if shorter).
  The line says so, the threads' stacks (Python's, and the native ones when ``gdb`` or
  ``py-spy`` is installed) go to ``stall-stacks.txt`` in the run directory, and the
  process ends with ``EXIT_CODE`` (75, ``EX_TEMPFAIL``: a scheduler may requeue the job;
  ``--resume`` continues from the newest checkpoint, which the watch never touches).
- **several processes**: a lost process (``psijax.parallel.peers``): the same line on
  every survivor, exit code 75. A collective that fails with a communication error says
  so at once (``check``). The bound never exceeds ``peers.max_bound_s(floor)``, so that
  psijax speaks before JAX's coordination service aborts the process.
"""

from __future__ import annotations

import contextlib
import ctypes
import faulthandler
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

from psijax.parallel import peers

EXIT_CODE = peers.EXIT_CODE
FACTOR = 10.0  # the bound in median steps
FIRST = 5.0  # the bound in floors until a step has completed
RECENT = 20  # step times the median is taken over
IDLE_CPU = 0.1  # cores: less than this is idle
IDLE_WINDOW_S = 10.0  # seconds of idleness that make a step past its bound a stall
STACKS = "stall-stacks.txt"


class StepWatch:
    """Watches one host loop (training or evaluation, and the pretraining and burn-in
    before training); see the module docstring.

    Use as a context manager around the loop, ``arm()`` it when the steps start (or a
    phase's), ``beat`` after each completed step, ``disarm()`` while nothing should be
    timed, ``check`` each runtime error. ``floor_s`` 0 turns the watch
    off (``check`` still reports a lost process). ``resume`` is the command that continues
    the run; ``newest_checkpoint()`` gives the newest complete checkpoint step on disk (or
    None); ``before_exit`` runs just before the process ends (make the metrics rows
    durable); ``stacks_dir`` receives the stacks file of a stall; ``cpu_does_the_work``
    (the CPU backend) lets a busy process outlast the bound.
    """

    def __init__(
        self,
        resume: str,
        floor_s: float,
        *,
        process: int = 0,
        processes: int = 1,
        step: int = 0,
        newest_checkpoint: Callable[[], int | None] = lambda: None,
        before_exit: Callable[[], None] | None = None,
        stacks_dir: Path | None = None,
        cpu_does_the_work: bool = False,
    ):
        self.resume, self.floor_s = resume, float(floor_s)
        self.process, self.processes = process, processes
        self.step = step  # steps completed so far
        self.phase, self._counted, self._unit = "", True, "step"  # see arm()
        self._newest_checkpoint = newest_checkpoint
        self._before_exit = before_exit
        self.stacks_dir = stacks_dir
        self.cpu_does_the_work = cpu_does_the_work
        self.enabled = self.floor_s > 0
        self._times: deque[float] = deque(maxlen=RECENT)
        self._last = time.monotonic()
        self._armed = False
        self._cpu: deque[tuple[float, float]] = deque()  # (wall, process CPU) samples
        self._busy = time.monotonic()  # when the process was last seen using CPU
        self._doing = "the start of the run"  # what is under way while nothing is timed
        self._stop = threading.Event()
        self._ending = threading.Lock()
        self._thread = threading.Thread(target=self._watch, name="psijax-step-watch", daemon=True)

    def __enter__(self) -> StepWatch:
        if self.enabled:
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def arm(
        self, phase: str = "", *, step: int | None = None, counted: bool = True, unit: str = "step"
    ) -> None:
        """From now on, steps must complete within the bound: the run's own steps, or
        those of ``phase`` ("pretraining"; ``counted=False`` for a phase that completes
        in one call, such as "burn-in"). The times of an earlier phase no longer count;
        ``step`` is the count of steps already completed in this one; ``unit`` names
        what one beat completes ("chunk of 25 steps")."""
        self.phase, self._counted, self._unit = phase, counted, unit
        if step is not None:
            self.step = step
        self._times.clear()
        self._last = time.monotonic()
        self._armed = True

    def disarm(self, doing: str | None = None) -> None:
        """Until the next ``arm``, nothing is timed (compiling, work between phases); a
        process that idles for the floor then has stalled in ``doing`` (in words:
        "pretraining's first chunk")."""
        self._armed = False
        self._busy = time.monotonic()
        if doing is not None:
            self._doing = doing

    def beat(self, step: int) -> None:
        """``step`` steps are complete."""
        now = time.monotonic()
        if self._armed:
            self._times.append(now - self._last)
        self.step = step
        self._last = now

    def bound_s(self) -> float:
        """Seconds the next step may take before the watch looks closer."""
        if not self._times:
            bound = FIRST * self.floor_s
        else:
            bound = max(self.floor_s, FACTOR * statistics.median(self._times))
        if self.processes > 1:
            bound = min(bound, peers.max_bound_s(self.floor_s))
        return bound

    def check(self, err: BaseException) -> None:
        """End the process with the lost-process line if ``err`` is (or was caused by) a
        communication error of a multi-process run; return otherwise (the caller
        re-raises)."""
        if self.processes < 2:
            return
        runtime = peers.runtime_error_in(err)
        if runtime is not None and peers.is_communication_error(runtime):
            self.lost(peers.cause_of(runtime))

    def lost(self, cause: str, process: int | None = None) -> NoReturn:
        """Report the lost process (``process`` if known) in one line and end this one."""
        self._end(lambda: peers.lost_line(
            cause, self._done(), self._newest(), self.resume, self.process, self.processes,
            process,
        ))  # fmt: skip

    def stalled(self, silent_s: float) -> NoReturn:
        """Report this process's stalled step in one line, with its stacks, and end it."""
        stacks = self._write_stacks(silent_s)
        median = statistics.median(self._times) if self._times else None
        expected = (
            f"{FACTOR:g}x the median {self._unit} of {median:.3g} s, at least {self.floor_s:g} s"
            if median is not None
            else f"{FIRST:g}x the {self.floor_s:g} s floor before any step had completed"
        )
        idle = ", the process idle" if self.cpu_does_the_work else ""
        self._end_stalled(
            f"{self._current()} stalled: not finished after {silent_s:.0f} s ({expected}{idle})",
            stacks, "if steps are really this slow, raise --stall-timeout",
        )  # fmt: skip

    def stalled_idle(self, idle_s: float) -> NoReturn:
        """Report that the process has been idle for ``idle_s`` while nothing was timed."""
        stacks = self._write_stacks(idle_s)
        self._end_stalled(
            f"{self._doing} stalled: the process has been idle for {idle_s:.0f} s (compiling "
            "keeps a core busy)", stacks, "if the run waits on something slow, raise "
            "--stall-timeout",
        )  # fmt: skip

    def _end_stalled(self, what: str, stacks: Path | None, hint: str) -> NoReturn:
        where = f"the threads' stacks are in {stacks}; " if stacks is not None else ""
        self._end(lambda: f"psijax: error: {what}; {where}{peers.saved_clause(self._newest())}; "
                  f"continue with: {self.resume} ({hint})")  # fmt: skip

    def _current(self) -> str:
        """The step under way, in words: "step 8", "pretraining step 26", "burn-in"."""
        if not self._counted:
            return self.phase
        return f"{self.phase} step {self.step + 1}".lstrip()

    def _done(self) -> int | str:
        """The last completed step of the run (a number), or what was under way in words:
        "after pretraining step 25", "during burn-in"."""
        if not self.phase:
            return self.step
        if not self._counted:
            return f"during {self.phase}"
        return f"after {self.phase} step {self.step}"

    def _newest(self) -> int | None:
        try:
            return self._newest_checkpoint()
        except Exception:
            return None

    def _end(self, line: Callable[[], str]) -> NoReturn:
        """Run ``before_exit``, then write ``line()`` and exit: the line is made last, so
        that the checkpoint it names is the newest one an asynchronous save completed
        while the rows were written."""
        with self._ending:  # the watchdog and the loop may both get here; one line only
            if self._before_exit is not None:
                with contextlib.suppress(Exception):  # the line matters more than the rows
                    self._before_exit()
            line = line()
            for stream in (sys.stdout, sys.stderr):
                with contextlib.suppress(Exception):  # a closed or broken stream
                    stream.flush()
            lead = "\n" if sys.stderr.isatty() else ""  # off a live progress line
            os.write(2, f"{lead}{line}\n".encode())
            os._exit(EXIT_CODE)

    def _idle(self, now: float) -> bool:
        """Whether the process used less than IDLE_CPU of a core over the last
        IDLE_WINDOW_S seconds (False until that long has been sampled)."""
        window = min(IDLE_WINDOW_S, self.floor_s)
        self._cpu.append((now, time.process_time()))
        while len(self._cpu) > 2 and now - self._cpu[1][0] >= window:
            self._cpu.popleft()
        start_wall, start_cpu = self._cpu[0]
        span = now - start_wall
        if span < window:
            return False
        return (self._cpu[-1][1] - start_cpu) < IDLE_CPU * span

    def _watch(self) -> None:
        poll = min(1.0, self.floor_s / 10)
        while not self._stop.wait(poll):
            now = time.monotonic()
            silent = now - self._last
            idle = self._idle(now) if self.cpu_does_the_work else True
            if not idle:
                self._busy = now
            if not self._armed:
                idle_s = now - self._busy
                watched = self.processes == 1 and self.cpu_does_the_work
                if watched and idle_s >= max(self.floor_s, IDLE_WINDOW_S):
                    self.stalled_idle(idle_s)
                continue
            if silent <= self.bound_s():
                continue
            if self.processes > 1:
                self.lost(f"no step completed for {silent:.0f} s; it stopped or hangs")
            if idle:
                self.stalled(silent)

    def _write_stacks(self, silent_s: float) -> Path | None:
        if self.stacks_dir is None:
            return None
        path = Path(self.stacks_dir) / STACKS
        try:
            with open(path, "w") as f:
                f.write(
                    f"psijax: {self._current() if self._armed else self._doing} had not "
                    f"finished after {silent_s:.0f} s "
                    f"(process {os.getpid()}, {time.strftime('%Y-%m-%d %H:%M:%S')})\n\n"
                    "== Python threads ==\n"
                )
                f.flush()
                faulthandler.dump_traceback(f, all_threads=True)
                f.write("\n== native threads ==\n")
                f.write(native_stacks(os.getpid()))
        except OSError:
            return None
        return path


def native_stacks(pid: int, timeout_s: float = 120.0) -> str:
    """Every thread's native stack of process ``pid`` by gdb or py-spy, or why not.

    The debugger stops every thread of ``pid`` while it reads them, the caller's too: it
    writes to a file, not to a pipe that the stopped caller would have to drain, and it
    runs under ``timeout`` in a shell that then sends ``pid`` SIGCONT (a debugger ended
    while attached leaves its process stopped)."""
    _allow_tracing_by_children()
    commands = []
    if shutil.which("gdb"):
        commands.append(f"gdb -nx -p {pid} -batch -iex 'set debuginfod enabled off' "
                        "-ex 'thread apply all bt'")  # fmt: skip
    if shutil.which("py-spy"):
        commands.append(f"py-spy dump --native --pid {pid}")
    if not shutil.which("timeout"):
        commands = []
    for command in commands:
        with tempfile.NamedTemporaryFile("r", suffix=".txt") as out:
            script = (
                f"timeout -k 5 {timeout_s:.0f} {command} > {out.name} 2>&1; status=$?; "
                f"kill -CONT {pid}; exit $status"
            )
            try:
                done = subprocess.run(["sh", "-c", script], timeout=timeout_s + 30)
            except (OSError, subprocess.TimeoutExpired):
                continue
            text = out.read()
        if done.returncode == 0 and text.strip():
            return f"$ {command}\n{text}"
    return "(not available: install gdb or py-spy to see the native threads)\n"


def _allow_tracing_by_children() -> None:
    """Let a debugger started by this process attach to it (Linux's Yama ptrace scope 1
    allows only ancestors otherwise)."""
    if not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(Exception):
        pr_set_ptracer, any_process = 0x59616D61, ctypes.c_ulong(-1)
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_ptracer, any_process, 0, 0, 0)
