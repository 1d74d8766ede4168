"""scripts/run.sh: each system in its own directory, and no run deleted without asking.

The script runs from a copy of the repository's scripts/ with a stand-in .venv: its
`python` is this interpreter and its `psijax` prints the arguments it was given, so the
test checks the script's decisions in milliseconds without training.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import psijax

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "run.sh"


@pytest.fixture
def repo(tmp_path):
    (tmp_path / "scripts").mkdir()
    shutil.copy(SCRIPT, tmp_path / "scripts" / "run.sh")
    bin_ = tmp_path / ".venv" / "bin"
    bin_.mkdir(parents=True)
    root = Path(psijax.__file__).resolve().parents[1]
    (bin_ / "python").write_text(f'#!/bin/sh\nPYTHONPATH="{root}" exec "{sys.executable}" "$@"\n')
    (bin_ / "psijax").write_text('#!/bin/sh\necho "psijax $*"\n')
    for name in ("python", "psijax"):
        (bin_ / name).chmod(0o755)
    return tmp_path


def run(repo: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", "scripts/run.sh", *args], cwd=repo, capture_output=True, text=True,
        env={**os.environ, "PSIJAX_SKIP_INSTALL": "1"}, timeout=60,
    )  # fmt: skip


def finished(run_dir: Path) -> None:
    run_dir.mkdir(parents=True)
    (run_dir / "config.json").write_text("{}")
    summary = {"system": "LiH", "energy_text": "-8.07025(19)", "steps": 1500}
    (run_dir / "summary.json").write_text(json.dumps(summary))


@pytest.mark.parametrize(
    "args,out",
    [
        ((), "runs/lih"),
        (("--system", "H2"), "runs/h2"),
        (("--system=N2", "--steps", "10"), "runs/n2"),
        (("--system", "Li 0 0 0; H 0 0 3.015"), "runs/li-0-0-0-h-0-0-3-015"),
        (("--system", "mols/water.xyz"), "runs/water"),
        (("--system", "H2", "--out", "mine"), "mine"),
    ],
)
def test_each_system_gets_its_own_directory(repo, args, out):
    proc = run(repo, *args)
    assert proc.returncode == 0, proc.stderr
    assert (proc.stdout.strip() + " ").startswith(f"psijax train --out {out} "), proc.stdout
    assert "--force" not in proc.stdout


def test_a_config_file_names_the_directory(repo):
    (repo / "h2.toml").write_text('system = "H2"\n')
    proc = run(repo, "--config", "h2.toml")
    assert proc.stdout.startswith("psijax train --out runs/h2 "), proc.stdout + proc.stderr


def test_a_finished_run_is_kept_and_the_script_says_how_to_go_on(repo):
    finished(repo / "runs" / "lih")
    before = sorted(p.name for p in (repo / "runs" / "lih").iterdir())
    proc = run(repo)
    assert proc.returncode == 0
    assert proc.stdout.count("\n") == 1, proc.stdout
    line = proc.stdout.strip()
    assert line.startswith("runs/lih holds a finished run (LiH, E = -8.07025(19) Ha")
    assert "psijax train --resume runs/lih --steps 3000" in line
    assert "bash scripts/run.sh --force" in line
    assert sorted(p.name for p in (repo / "runs" / "lih").iterdir()) == before


def test_an_unfinished_run_is_resumed(repo):
    (repo / "runs" / "h2").mkdir(parents=True)
    (repo / "runs" / "h2" / "config.json").write_text("{}")
    proc = run(repo, "--system", "H2")
    assert proc.stdout.strip() == "psijax train --resume runs/h2 --system H2"
    assert "resuming it" in proc.stderr


def test_force_is_passed_only_when_asked_for(repo):
    finished(repo / "runs" / "lih")
    proc = run(repo, "--force")
    assert proc.stdout.strip() == "psijax train --out runs/lih --force"


def test_a_dry_run_looks_at_the_systems_directory(repo):
    finished(repo / "runs" / "h2")
    proc = run(repo, "--system", "H2", "--dry-run")
    assert proc.stdout.strip() == "psijax train --out runs/h2 --system H2 --dry-run"
