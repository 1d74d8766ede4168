"""One writer per output: a second training run or evaluation on the same directory is
refused before it writes anything, and a lock dies with the process that held it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import psijax
from psijax.errors import InputError
from psijax.rundir import lock
from tests.eval_runs import snapshot, trained_run
from tests.runs import TINY

HOLD = """
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)
fcntl.flock(fd, fcntl.LOCK_EX)
os.write(fd, b"pid 4242 on somewhere, since 2026-01-01 00:00:00")
print("held", flush=True)
time.sleep(120)
"""


def _hold(path: Path) -> subprocess.Popen:
    """Another process holding the lock file ``path`` until killed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(path)], stdout=subprocess.PIPE, text=True
    )
    assert holder.stdout.readline().strip() == "held"
    return holder


def _end(holder: subprocess.Popen) -> None:
    """Kill the holder (no release: the kernel drops its lock with the process)."""
    holder.kill()
    holder.wait()
    holder.stdout.close()


def test_a_second_holder_is_refused_until_the_first_ends(tmp_path):
    path = tmp_path / "out" / lock.NAME
    refused = pytest.raises(InputError, match=r"another psijax process \(pid \d+ on .*training")
    with lock.holding(path, "training run in 'out'"), refused:
        assert "pid" in path.read_text()
        with lock.holding(path, "training run in 'out'"):
            pass
    with lock.holding(path, "training run in 'out'"):  # released on leaving the block
        pass
    holder = _hold(path)
    try:
        with (
            pytest.raises(InputError, match="pid 4242 on somewhere"),
            lock.holding(path, "training run in 'out'"),
        ):
            pass
    finally:
        _end(holder)
    with lock.holding(path, "training run in 'out'"):
        pass


def test_training_into_a_directory_in_use_is_refused_and_changes_nothing(tmp_path):
    run = trained_run(tmp_path)
    holder = _hold(run / lock.NAME)
    try:
        before = snapshot(run)
        for how in (dict(force=True), dict(resume=True)):
            with pytest.raises(InputError, match=r"another psijax process .* --out"):
                psijax.train(out=str(run), progress=False, steps=2, **TINY, **how)
            assert snapshot(run) == before
    finally:
        _end(holder)
    psijax.train(out=str(run), progress=False, steps=8, resume=True)  # free again


def test_a_second_evaluation_of_one_run_is_refused(tmp_path):
    run = trained_run(tmp_path)
    holder = _hold(run / "eval" / lock.NAME)
    try:
        before = snapshot(run)
        with pytest.raises(InputError, match=r"writing the evaluation of .* then evaluate again"):
            psijax.evaluate(str(run), steps=2, burn_in=0, progress=False, force=True)
        assert snapshot(run) == before
    finally:
        _end(holder)
