"""A process of a two-process run on 127.0.0.1 dies (SIGKILL) or hangs (SIGSTOP) after the
first checkpoint: the survivor stops within the stated time with exit code 75 and one psijax
line as the last line of its stderr (no traceback, no stack dump); the checkpoint it names is
intact, and a resume on one process continues the metrics exactly (the rows written before
the checkpoint stay as they were; every row equals an uninterrupted run's)."""

from __future__ import annotations

import os
import re
import signal
import socket
import time

import numpy as np
import pytest

from psijax.parallel import peers
from psijax.rundir import checkpoint

from close import assert_energies_close, column
from eval_runs import trained_run
from runs import metrics, psijax, start, tiny_config

PEER_TIMEOUT_S = 8  # --peer-timeout of these runs; the default is 120 s
# Stated bound: a dead peer is reported at the next collective (well under a second here), a
# hung one at most max(PEER_TIMEOUT_S, 10 median steps) + 1 s after its last completed step
# (these steps take well under 0.8 s); 11 s more for a loaded machine. JAX's own abort
# could come at the earliest peers.max_bound_s(PEER_TIMEOUT_S) + 30 s.
BOUND_S = PEER_TIMEOUT_S + 12
STEPS = 24  # the resumed run goes to this step; the killed runs are set to run far longer
CONFIG = dict(checkpoint_every=3, pretrain_steps=0)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory) -> list[dict[str, str]]:
    """The metrics of the same run on one process (two devices) that nothing interrupted."""
    tmp = tmp_path_factory.mktemp("uninterrupted")
    config = tiny_config(tmp, steps=STEPS, **CONFIG)
    result = psijax("train", "--config", config, "--out", tmp / "run", "--quiet", devices=2)
    assert result.returncode == 0, result.stderr
    return metrics(tmp / "run")


def lose_process_1(tmp_path, signum: int) -> tuple[int, str, float]:
    """Two processes of one device each; ``signum`` to process 1 once the first checkpoint
    is on disk. Returns process 0's exit code, its stderr and its seconds after the signal."""
    config = tiny_config(tmp_path, steps=100_000, **CONFIG)
    run = tmp_path / "run"
    argv = ("train", "--config", config, "--out", run, "--quiet", "--peer-timeout",
            str(PEER_TIMEOUT_S), "--coordinator", f"127.0.0.1:{free_port()}")  # fmt: skip
    procs = {i: start(*argv, "--num-processes", "2", "--process-id", str(i)) for i in (1, 0)}
    try:
        deadline = time.monotonic() + 300
        while checkpoint.newest_complete(run) is None:
            for p in procs.values():
                assert p.poll() is None, p.communicate()[1]
            assert time.monotonic() < deadline, "no checkpoint after 300 s"
            time.sleep(0.1)
        os.kill(procs[1].pid, signum)
        signalled = time.monotonic()
        _, stderr = procs[0].communicate(timeout=BOUND_S + 120)
        return procs[0].returncode, stderr, time.monotonic() - signalled
    finally:
        for p in procs.values():  # a stopped process dies of SIGKILL too
            if p.poll() is None:
                p.kill()
            p.communicate()


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGKILL, signal.SIGSTOP], ids=["killed", "hung"])
def test_a_lost_process_stops_the_run_with_one_line_and_the_resume_continues_exactly(
    tmp_path, signum, uninterrupted
):
    run = tmp_path / "run"
    code, stderr, seconds = lose_process_1(tmp_path, signum)

    print(f"process 0 stopped {seconds:.1f} s after the signal, exit code {code}")
    assert code == peers.EXIT_CODE, stderr[-3000:]
    assert seconds < BOUND_S, f"{seconds:.1f} s"
    last = stderr.strip().splitlines()[-1]
    found = re.fullmatch(
        r"psijax: error: lost process 1 of 2 \((.+)\) after step (\d+); the newest intact "
        rf"checkpoint is step (\d+); continue with: psijax train --resume {re.escape(str(run))}",
        last,
    )
    assert found, last
    cause, reached, saved = found.group(1), int(found.group(2)), int(found.group(3))
    if signum == signal.SIGSTOP:
        assert "no step completed" in cause
    assert 3 <= saved <= reached and saved == checkpoint.newest_complete(run)
    assert saved + 3 <= STEPS, "the peer was lost too late for this test's reference run"
    assert "Traceback" not in stderr and "stack trace" not in stderr

    # a checkpoint whose writing the lost process interrupted: never renamed into place
    in_flight = run / "checkpoints" / f"{saved + 3}.orbax-checkpoint-tmp"
    (in_flight / "state").mkdir(parents=True, exist_ok=True)
    (in_flight / "state" / "partial").write_bytes(b"\0" * 100)
    assert checkpoint.newest_complete(run) == saved

    before = metrics(run)
    resumed = psijax("train", "--resume", run, "--steps", str(STEPS), "--quiet")
    assert resumed.returncode == 0, resumed.stderr  # the checkpoint is intact (checksums)
    after = metrics(run)
    assert [int(r["step"]) for r in after] == list(range(STEPS))
    assert after[:saved] == before[:saved]  # the rows before the checkpoint are kept
    # float32 sums over 2 devices (uninterrupted), 2 processes, then 1 device (resumed):
    # equal to 2e-5 of the local energies' scale (a step's mean energy can be near 0)
    assert_energies_close(column(after, "energy"), column(uninterrupted, "energy"),
                          column(uninterrupted, "variance"), rtol=2e-5)  # fmt: skip


@pytest.mark.slow
def test_a_lost_process_stops_an_evaluation_too_with_its_checkpoint_intact(tmp_path):
    """Evaluation runs in training's host loop: a killed peer stops the survivor with the
    same line (naming the evaluation's resume command) and exit code 75."""
    run = trained_run(tmp_path)
    argv = ("evaluate", run, "--steps", "100000", "--burn-in-steps", "1", "--checkpoint-every",
            "3", "--quiet", "--peer-timeout", str(PEER_TIMEOUT_S), "--coordinator",
            f"127.0.0.1:{free_port()}")  # fmt: skip
    procs = {i: start(*argv, "--num-processes", "2", "--process-id", str(i)) for i in (1, 0)}
    try:
        deadline = time.monotonic() + 300
        while checkpoint.newest_complete(run / "eval") is None:
            for p in procs.values():
                assert p.poll() is None, p.communicate()[1]
            assert time.monotonic() < deadline, "no checkpoint after 300 s"
            time.sleep(0.1)
        os.kill(procs[1].pid, signal.SIGKILL)
        signalled = time.monotonic()
        _, stderr = procs[0].communicate(timeout=BOUND_S + 120)
        seconds = time.monotonic() - signalled
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.kill()
            p.communicate()
    assert procs[0].returncode == peers.EXIT_CODE, stderr[-3000:]
    assert seconds < BOUND_S, f"{seconds:.1f} s"
    last = stderr.strip().splitlines()[-1]
    found = re.fullmatch(
        r"psijax: error: lost process 1 of 2 \((.+)\) after step (\d+); the newest intact "
        rf"checkpoint is step (\d+); continue with: psijax evaluate {re.escape(str(run))} "
        "--resume",
        last,
    )
    assert found, last
    saved = int(found.group(3))
    assert saved == checkpoint.newest_complete(run / "eval")
    assert [int(r["step"]) for r in metrics(run / "eval")][:saved] == list(range(saved))
    # the checkpoint it names is intact: its arrays match their checksums (a resume from
    # it is tested in test_evaluate.py)
    from psijax import parallel, sampling
    from psijax.evaluation import step as eval_step

    template = eval_step.abstract_state(
        16, 2, np.float32, parallel.make_mesh(1), sampling.Metropolis()
    )
    reader = checkpoint.Checkpoints(run / "eval", read_only=True)
    try:
        state = reader.restore(template, {})
    finally:
        reader.close()
    assert int(state.step) == saved


WATCHED = """
import time
from psijax.run.watch import StepWatch
watch = StepWatch("psijax train --resume RUN", {timeout}, process=0, processes=2, step=7,
                  newest_checkpoint=lambda: 6, before_exit=lambda: print("rows flushed"))
with watch:
    watch.arm()
    for step in range(8, 8 + {beats}):
        time.sleep({timeout} / 20)
        watch.beat(step)
    print("last beat", time.monotonic(), flush=True)
    time.sleep({timeout} * 10)
print("not stopped")
"""


def test_the_watchdog_stops_a_silent_run_after_the_timeout_and_not_before(tmp_path):
    """Beats every twentieth of the timeout keep it quiet (ten of those steps are below
    the floor, so the floor is the bound); then it stops the process within the timeout
    plus its polling interval (a tenth of the timeout) plus scheduling slack."""
    import subprocess
    import sys

    timeout = 1.0
    code = WATCHED.format(timeout=timeout, beats=40)  # 2 timeouts of beats
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    ended = time.monotonic()
    assert result.returncode == peers.EXIT_CODE, result.stderr
    lines = result.stdout.splitlines()
    assert lines[-1] == "rows flushed" and "not stopped" not in result.stdout
    silent = ended - float(lines[-2].split()[-1])
    assert timeout < silent < timeout + 0.1 * timeout + 2.0, silent
    assert result.stderr.splitlines() == [
        "psijax: error: lost process 1 of 2 (no step completed for 1 s; it stopped or hangs) "
        "after step 47; the newest intact checkpoint is step 6; continue with: psijax train "
        "--resume RUN"
    ]


@pytest.mark.parametrize(
    ("error", "lost"),
    [
        ("UNKNOWN: Gloo AllGather failed: [external/gloo/gloo/transport/tcp/pair.cc:547] "
         "Connection closed by peer [127.0.0.1]:56204", True),
        ("INTERNAL: NCCL operation ncclAllReduce failed: remote process exited", True),
        ("UNAVAILABLE: Failed to send RPC to coordination service", True),
        ("RESOURCE_EXHAUSTED: Out of memory while trying to allocate 8.00GiB", False),
        ("INVALID_ARGUMENT: Executable expected parameter 0 of size 64", False),
    ],
)  # fmt: skip
def test_only_communication_errors_count_as_a_lost_peer(error, lost):
    assert peers.is_communication_error(RuntimeError(error)) is lost


def test_a_wrapped_runtime_error_is_found_and_others_are_not():
    class JaxRuntimeError(RuntimeError):  # what jax.errors calls it; matched by name
        pass

    try:
        try:
            raise JaxRuntimeError("UNAVAILABLE: barrier failed")
        except JaxRuntimeError as err:
            raise TimeoutError("Timed out while waiting for a barrier") from err
    except TimeoutError as err:
        assert isinstance(peers.runtime_error_in(err), JaxRuntimeError)
    assert peers.runtime_error_in(ValueError("a peer said barrier")) is None
    # seen when the peer died during an orbax save: process_allgather's status as a ValueError
    gloo = ValueError(
        "UNKNOWN: Gloo AllGather failed: [external/gloo/gloo/transport/tcp/pair.cc:538] "
        "Read error [127.0.0.1]:3493: Connection reset by peer"
    )
    found = peers.runtime_error_in(gloo)
    assert found is gloo and peers.is_communication_error(found)


def test_the_cause_is_the_first_line_without_source_locations():
    err = RuntimeError(
        "UNKNOWN: Gloo AllGather failed: [external/gloo/gloo/transport/tcp/pair.cc:547] "
        "Connection closed by peer [127.0.0.1]:56204\nmore detail"
    )
    assert peers.cause_of(err) == (
        "Gloo AllGather failed: Connection closed by peer [127.0.0.1]:56204"
    )


def test_jax_aborts_only_after_the_watchdog_has_spoken():
    """JAX's coordination service may end a process as early as half its heartbeat timeout
    after a peer stops; that is 30 s after the watch's longest bound, whatever the floor."""
    from psijax.run.watch import FIRST, StepWatch

    for timeout in (1, 8, 120, 3600):
        assert peers.heartbeat_s(timeout) / 2 >= peers.max_bound_s(timeout) + 30
        watch = StepWatch("resume", timeout, processes=2)
        assert watch.bound_s() == FIRST * timeout  # nothing measured yet
        watch.arm()
        watch._times.extend([1e6] * 3)  # very slow steps: the bound stops growing
        assert watch.bound_s() == peers.max_bound_s(timeout)


@pytest.mark.parametrize("value", ["0", "-5", "soon"])
def test_a_bad_peer_timeout_is_bad_input(value, monkeypatch):
    from psijax.errors import InputError
    from psijax.parallel import distributed

    monkeypatch.setenv(peers.ENV, value)
    with pytest.raises(InputError, match=r"PSIJAX_PEER_TIMEOUT|peer timeout"):
        distributed.initialize()
    monkeypatch.delenv(peers.ENV)
    with pytest.raises(InputError, match="must be > 0"):
        distributed.initialize(peer_timeout_s=0.0)
