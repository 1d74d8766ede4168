"""Checkpoints: kill -9 at a random moment and resume gives the uninterrupted run exactly;
SIGTERM writes a checkpoint and exits cleanly; restoring on another device count reshards;
repeated non-finite steps stop the run with the last good checkpoint intact."""

from __future__ import annotations

import dataclasses
import io
import random
import signal
import time

import jax.numpy as jnp
import numpy as np
import pytest

import psijax
from psijax import optim
from psijax.errors import TrainingError
from psijax.run.loop import CheckpointPolicy, HostLoop
from psijax.run.progress import Progress
from psijax.rundir.checkpoint import Checkpoints

from close import assert_energies_close, column
from runs import metrics, start, tiny_config
from runs import psijax as run_cli


def checkpoint_steps(run_dir) -> list[int]:
    d = run_dir / "checkpoints"
    return sorted(int(p.name) for p in d.iterdir() if p.name.isdigit()) if d.is_dir() else []


def assert_same_final_state(a, b):
    left, right = Checkpoints(a, read_only=True).arrays(), Checkpoints(b, read_only=True).arrays()
    assert len(left) == len(right)
    for x, y in zip(left, right, strict=True):
        np.testing.assert_array_equal(x, y)


def test_kill_9_at_random_moments_then_resume_equals_the_uninterrupted_run(tmp_path):
    config = tiny_config(tmp_path, steps=60, checkpoint_every=4, keep_checkpoints=2)
    full = run_cli("train", "--config", config, "--out", tmp_path / "full", "--quiet")
    assert full.returncode == 0, full.stderr

    seed = random.randrange(10**6)
    rng = random.Random(seed)
    killed = tmp_path / "killed"
    argv = ("train", "--config", config, "--out", killed, "--quiet")
    kills = 0
    for attempt in range(2):  # kill the first run, then kill its resumption
        proc = start(*argv) if attempt == 0 else start("train", "--resume", killed, "--quiet")
        before = checkpoint_steps(killed)
        deadline = time.monotonic() + 240
        while proc.poll() is None and checkpoint_steps(killed) == before:
            assert time.monotonic() < deadline, "no checkpoint appeared"
            time.sleep(0.02)
        time.sleep(rng.uniform(0.0, 1.0))  # land anywhere: mid-step, mid-save, mid-row
        if proc.poll() is None:
            proc.kill()
            kills += 1
        proc.communicate()
    resumed = run_cli("train", "--resume", killed, "--quiet")
    assert resumed.returncode == 0, f"seed {seed}: {resumed.stderr}"
    assert kills >= 1, f"seed {seed}: every run finished before it was killed"
    assert metrics(killed) == metrics(tmp_path / "full"), f"seed {seed}"
    assert_same_final_state(killed, tmp_path / "full")
    assert len(checkpoint_steps(killed)) == 2  # keep_checkpoints
    assert not [p for p in (killed / "checkpoints").iterdir() if "tmp" in p.name]


def test_sigterm_writes_a_checkpoint_and_exits_cleanly(tmp_path):
    config = tiny_config(tmp_path, steps=10_000, checkpoint_every=0, checkpoint_minutes=0)
    out = tmp_path / "run"
    proc = start("train", "--config", config, "--out", out, "--quiet")
    deadline = time.monotonic() + 240
    while len(metrics(out)) < 3 if (out / "metrics.csv").exists() else True:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 128 + signal.SIGTERM, stderr
    assert "Traceback" not in stderr
    message = stderr.strip().splitlines()[-1]
    assert "SIGTERM received: checkpoint written at step" in message
    assert f"--resume {out}" in message
    step = int(message.split("at step ")[1].split(";")[0])
    assert checkpoint_steps(out) == [step]
    assert len(metrics(out)) == step  # every step before the checkpoint has its row

    resumed = run_cli("train", "--resume", out, "--steps", step + 2, "--quiet")
    assert resumed.returncode == 0, resumed.stderr
    assert [int(r["step"]) for r in metrics(out)] == list(range(step + 2))


SMALL = dict(
    system="H2", layers=((8, 4),), determinants=1, walkers=16, pretrain_steps=0,
    burn_in_steps=2, mcmc_moves=2, progress=False,
)  # fmt: skip


@pytest.mark.parametrize("devices", [pytest.param(2, marks=pytest.mark.compat), 1])
def test_a_run_saved_on_four_devices_continues_on_fewer(tmp_path, devices):
    full = psijax.train(**SMALL, steps=8, devices=4, out=str(tmp_path / "full"))
    out = str(tmp_path / "moved")
    psijax.train(**SMALL, steps=4, devices=4, checkpoint_every=4, out=out)
    moved = psijax.train(out=out, resume=True, steps=8, devices=devices, progress=False)
    np.testing.assert_array_equal(moved.energies[:4], full.energies[:4])
    # Another device count sums in another order: equal to float32 rounding of the local
    # energies (a step's mean can be near 0 Ha; the local energies are not)
    variance = column(metrics(full.out), "variance")
    assert_energies_close(moved.energies, full.energies, variance, rtol=2e-5)


def test_repeated_nonfinite_steps_stop_the_run_and_keep_the_last_good_checkpoint(tmp_path):
    from test_step import setup

    step, state = setup(1, optim.adam())
    checkpoints = Checkpoints(tmp_path, keep=5)
    rows = []
    loop = HostLoop(step, n_steps=50, on_metrics=lambda i, m: rows.append(m),
                    checkpoints=checkpoints, policy=CheckpointPolicy(every_steps=1),
                    max_rejected=3)  # fmt: skip
    state = loop.run(state, start=0)  # 50 good steps, checkpointed
    checkpoints.wait()
    good = checkpoints.arrays()
    poisoned = state._replace(walkers=jnp.full_like(state.walkers, jnp.nan))
    loop = dataclasses.replace(loop, n_steps=100)
    with pytest.raises(
        TrainingError, match=r"3 steps in a row .* rejected.* checkpoint is step 50"
    ):
        loop.run(poisoned, start=50)
    checkpoints.close()
    assert [m["rejected"] for m in rows[50:]] == [1.0, 1.0, 1.0]
    assert checkpoints.latest() == 50
    for x, y in zip(good, checkpoints.arrays(), strict=True):
        np.testing.assert_array_equal(x, y)


def test_the_progress_display_counts_rejected_steps():
    stream = io.StringIO()
    show = Progress(3, stream=stream)
    for i, rejected in enumerate([0.0, 1.0, 1.0]):
        show.step(i, {"energy": -1.0, "variance": 0.1, "acceptance": 0.5, "rejected": rejected})
    assert stream.getvalue().strip().splitlines()[-1].endswith("rejected 2")
