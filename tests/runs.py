"""Helpers for tests that run the `psijax` command in a subprocess on a tiny network."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

TINY = dict(
    system="H2", layers=[[8, 4]], determinants=1, walkers=16, pretrain_steps=3,
    burn_in_steps=3, mcmc_moves=2,
)  # fmt: skip


def tiny_config(tmp_path: Path, **extra) -> Path:
    """A TOML config of ``TINY`` updated by ``extra``."""
    path = tmp_path / "tiny.toml"
    lines = [f"{k} = {json.dumps(v)}" for k, v in {**TINY, **extra}.items()]
    path.write_text("\n".join(lines) + "\n")
    return path


def env(devices: int = 1) -> dict[str, str]:
    return {**os.environ, "JAX_NUM_CPU_DEVICES": str(devices), "PYTHONUNBUFFERED": "1"}


def command(*args: str | Path) -> list[str]:
    return [sys.executable, "-m", "psijax.cli", *map(str, args)]


def psijax(*args: str | Path, devices: int = 1, timeout: float = 300):
    return subprocess.run(
        command(*args), env=env(devices), capture_output=True, text=True, timeout=timeout
    )


def start(*args: str | Path, devices: int = 1) -> subprocess.Popen:
    return subprocess.Popen(
        command(*args), env=env(devices), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip


def metrics(run_dir: Path, drop=("seconds",)) -> list[dict[str, str]]:
    with open(run_dir / "metrics.csv", newline="") as f:
        return [{k: v for k, v in row.items() if k not in drop} for row in csv.DictReader(f)]


def orbax_read_noise(unraisable) -> bool:
    """What orbax/tensorstore leave behind after failing to read a damaged checkpoint:
    futures completed on the asyncio loop orbax has closed, and its own coroutines, never
    awaited or collected with the read's error still in them (which of the two depends on
    when its reader threads stop). Benign; psijax has already reported the damage."""
    if isinstance(unraisable.exc_value, RuntimeError):
        return "Event loop is closed" in str(unraisable.exc_value)
    code = getattr(unraisable.object, "cr_code", None)
    if code is None or "orbax" not in code.co_filename:
        return False
    if isinstance(unraisable.exc_value, RuntimeWarning):
        return "was never awaited" in str(unraisable.exc_value)
    return "error while reading array" in str(unraisable.exc_value)
