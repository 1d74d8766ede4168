"""What a new user sees: `psijax train` in a real terminal (a pty) and in a pipe.

A fresh run in a pty of 100 columns must show every phase line, a live progress line with
the running estimate `E=-1.17(2)` cut to the terminal's width, no blank line, and final
lines that name every output and the command that continues the run. Resuming it in a pipe
must say which step it restored, print whole progress lines on stderr and the report on
stdout.
"""

from __future__ import annotations

import fcntl
import os
import re
import select
import struct
import subprocess
import termios
import time

import pytest

from runs import command, env

COLUMNS = 100
TINY = [
    "--system", "H2", "--layers", "8x4", "--determinants", "1", "--walkers", "16",
    "--pretrain-steps", "2", "--burn-in-steps", "2", "--mcmc-moves", "2",
    "--optimizer", "adam", "--eval-fraction", "1",
]  # fmt: skip
PROGRESS = re.compile(r"step (\d+)/(\d+)  E=-?\d+\.\d+\(\d+\)")


def run_in_pty(argv: list[str], timeout: float = 300) -> tuple[int, str]:
    """Run ``argv`` with stdin, stdout and stderr on a pty of COLUMNS x 24; all it wrote."""
    leader, follower = os.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, COLUMNS, 0, 0))
    proc = subprocess.Popen(
        argv, stdin=follower, stdout=follower, stderr=follower, env=env(1), close_fds=True
    )
    os.close(follower)
    chunks, deadline = [], time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([leader], [], [], 1.0)
            if ready:
                try:
                    data = os.read(leader, 65536)
                except OSError:  # EIO: the child closed the terminal
                    break
                if not data:
                    break
                chunks.append(data)
            elif proc.poll() is not None:
                break
        code = proc.wait(timeout=max(deadline - time.monotonic(), 1))
    finally:
        os.close(leader)
        if proc.poll() is None:
            proc.kill()
    return code, b"".join(chunks).decode("utf-8", "replace").replace("\r\n", "\n")


@pytest.fixture(scope="module")
def tty_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("tty") / "h2"
    code, text = run_in_pty(command("train", *TINY, "--steps", "20", "--out", out))
    assert code == 0, text
    return out, text


@pytest.mark.slow
def test_a_terminal_shows_phases_progress_and_what_to_do_next(tty_run):
    out, text = tty_run
    lines = text.split("\n")
    for phase in (
        "H2: 2 electrons (1 up, 1 down)",
        "compiling the training step",
        "Hartree-Fock (UHF/sto-6g): E = -1.12",
        "pretraining on Hartree-Fock (sto-6g) (2 steps)",
        "burn-in (2 steps of 2 MCMC moves)",
        "compiled the training step (",
        "training (20 steps)",
    ):
        assert any(line.startswith(phase) for line in lines), (phase, text)
    assert "\n\n" not in text and not text.startswith("\n"), repr(text)

    # the live line: rewritten in place, cut to the width, last state = step 20 with E=...(..)
    live = [seg.removeprefix("\033[K") for seg in text.split("\r") if seg.startswith("\033[K")]
    steps = [seg for seg in live if seg.startswith("step ")]
    assert steps, text
    assert all(len(seg.split("\n")[0]) <= COLUMNS - 1 for seg in live), live
    final = steps[-1].split("\n")[0]
    match = PROGRESS.match(final)
    assert match and match.groups() == ("20", "20"), final
    assert len(final) == COLUMNS - 1, final  # the full line is longer: it was cut
    assert "naive" not in final  # 20 values: a blocking analysis

    report = dict(line.split(None, 1) for line in lines if re.match(r"^[a-z]+ {2,}", line))
    assert report["energy"].endswith("(blocking analysis of the last 20 steps)")
    assert report["exact"].startswith("-1.174476 Ha")
    assert "checkpoints/" in report["outputs"] and "metrics.csv" in report["outputs"]
    assert report["continue"] == f"psijax train --resume {out} --steps 40"
    assert (out / "checkpoints").is_dir() and (out / "summary.json").is_file()


@pytest.mark.slow
def test_a_pipe_resume_says_which_step_it_restored(tty_run):
    out, _ = tty_run
    proc = subprocess.run(
        command("train", "--resume", out, "--steps", "26", "--eval-fraction", "0.3"),
        env=env(1), capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    err = proc.stderr.splitlines()
    assert "\r" not in proc.stderr and "\033" not in proc.stderr
    assert any(line.startswith(f"restored step 20 from {out}/checkpoints (") for line in err)
    assert "training (26 steps, from step 20)" in err
    progress = [line for line in err if PROGRESS.match(line)]
    assert progress and PROGRESS.match(progress[-1]).groups() == ("26", "26")
    # 30% of 26 steps is 8 values: too few for blocking, and both lines say so
    assert "(naive, 8 steps)" in progress[-1] and "vs exact" in progress[-1]
    report = proc.stdout.splitlines()
    assert "naive error of the last 8 steps" in report[1]
    assert report[-1] == f"continue    psijax train --resume {out} --steps 52"
    assert not proc.stdout.startswith("\n") and "Hartree-Fock" not in proc.stderr
