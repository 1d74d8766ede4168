"""The run directory: config.json, metrics.csv, summary.json, energy.png and checkpoints/.

A new run refuses a directory that holds another run unless forced; a resumed run keeps
the metrics rows before its checkpoint and appends from there. Nothing is written until
every input has been checked (``check_new`` / ``read_config`` only read). Only process 0
writes; the other processes of a multi-process run get a writer that writes nothing.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import shutil
from pathlib import Path
from typing import Any

import numpy as np

from psijax import config as config_lib
from psijax.errors import InputError
from psijax.rundir import checkpoint
from psijax.statistics.blocking import Estimate
from psijax.system import Molecule

RUN_FILES = ("metrics.csv", "summary.json", "energy.png", "config.json", checkpoint.SUBDIR)


def check_new(out: Path, force: bool) -> None:
    """Refuse ``out`` if it holds a run and ``force`` is not given."""
    if out.exists() and not out.is_dir():
        raise InputError(f"output {str(out)!r} is a file, not a directory; choose another --out")
    existing = [name for name in RUN_FILES if (out / name).exists()]
    if existing and not force:
        raise InputError(
            f"output directory {str(out)!r} already holds a run ({existing[0]}); continue it "
            "with --resume, choose another --out, or pass --force to overwrite it"
        )


def read_config(out: Path) -> config_lib.Config:
    """The config of the run in ``out`` (for --resume)."""
    path = out / "config.json"
    if not path.is_file():
        raise InputError(
            f"{str(out)!r} holds no psijax run to resume (no config.json); start a new run "
            "with --out instead of --resume"
        )
    return checkpoint.as_trained(config_lib.load_saved(path), out)


class RunWriter:
    """Writes one run's files; ``resume_step`` keeps the metrics rows before that step."""

    def __init__(
        self,
        out: Path,
        molecule: Molecule,
        config: config_lib.Config,
        eigenstates,
        *,
        resume_step: int | None = None,
        resuming: bool = False,
        enabled: bool = True,
    ):
        self.out, self.molecule, self.enabled = out, molecule, enabled
        self.eigenstates = eigenstates  # what the run solves for (psijax.eigenstates)
        self.columns = eigenstates.columns()
        self.energies: list[float] = []  # every row's energy, kept rows' first (resumed runs)
        self.rows: list[dict[str, float]] = []  # every row's values, kept rows' first
        self.seconds_before = 0.0  # wall time of the kept rows
        if not enabled:
            return
        if not resuming:
            for name in RUN_FILES:  # only a forced run gets here with old files
                path = out / name
                if path.is_dir():
                    shutil.rmtree(path)
                elif path.exists():
                    path.unlink()
        out.mkdir(parents=True, exist_ok=True)
        kept = _read_rows(out / "metrics.csv", resume_step) if resume_step else []
        self.rows = [{k: _float(v) for k, v in r.items() if k != "step"} for r in kept]
        self.energies = [r["energy"] for r in self.rows]
        if kept:
            self.seconds_before = _float(kept[-1].get("seconds"))
        text = io.StringIO()
        writer = csv.DictWriter(text, self.columns, extrasaction="ignore", lineterminator="\n")
        writer.writeheader()
        writer.writerows(kept)
        atomic_write(out / "metrics.csv", text.getvalue())
        atomic_write(out / "config.json", json.dumps(config_lib.to_dict(config), indent=2))
        self._file = open(out / "metrics.csv", "a", newline="")  # noqa: SIM115
        self._csv = csv.writer(self._file, lineterminator="\n")

    def row(self, step: int, metrics: dict[str, float], seconds: float) -> None:
        self.energies.append(metrics["energy"])
        self.rows.append(metrics)
        if not self.enabled:
            return
        values = {"step": step, "seconds": round(self.seconds_before + seconds, 3), **metrics}
        self._csv.writerow([values.get(c, "") for c in self.columns])

    def flush(self) -> None:
        """Make every row so far durable (called before each checkpoint)."""
        if self.enabled:
            self._file.flush()
            os.fsync(self._file.fileno())

    def close(self) -> None:
        if self.enabled and not self._file.closed:
            self._file.close()

    def finish(
        self,
        est: Estimate,
        energies: np.ndarray,
        seconds: float,
        config: config_lib.Config,
        converged_at: int | None = None,
        states: list[Estimate] | None = None,
    ) -> None:
        """summary.json and energy.png from the run's energy estimate and per-step energies."""
        self.close()
        if not self.enabled:
            return
        exact = self.eigenstates.exact(self.molecule)
        summary: dict[str, Any] = {
            "system": config.system,
            "formula": " ".join(self.molecule.symbols),
            "charge": self.molecule.charge,
            "spin": self.molecule.spin,
            "energy": est.mean,
            "energy_error": est.error,
            "energy_text": str(est),
            "block_size": est.block_size,
            "autocorrelation_time": est.autocorrelation_time,
            "eval_steps": est.n_samples,
            "steps": config.steps,
            "steps_run": len(energies),
            "target_error": config.target_error,
            "converged_at": converged_at,
            "walkers": config.walkers,
            "optimizer": config.optimizer,
            "laplacian": config.laplacian,
            "ansatz": config.ansatz,
            "seconds": round(self.seconds_before + seconds, 2),
            "exact": exact,
            "error_vs_exact": None if exact is None else est.mean - exact,
            "fingerprint": self.molecule.fingerprint(),
            **per_electron(self.molecule, est),
        }
        if states is not None:  # several states: ``energy`` is the sum of theirs
            summary["states"] = [
                {"state": i, "energy": e.mean, "energy_error": e.error, "energy_text": str(e),
                 "excitation_energy": e.mean - states[0].mean}
                for i, e in enumerate(states)
            ]  # fmt: skip
        atomic_write(self.out / "summary.json", json.dumps(summary, indent=2))
        self.eigenstates.plot(
            self.out / "energy.png", energies, exact, est, states, self.rows, config.system
        )


def per_electron(system, est: Estimate) -> dict[str, Any]:
    """The energy per electron, and for a periodic system (the electron gas) what it is per:
    the energy is per cell, of ``electrons`` electrons at density ``rs``."""
    n = system.n_electrons
    values: dict[str, Any] = {"electrons": n, "energy_per_electron": est.mean / n,
                              "energy_per_electron_error": est.error / n}  # fmt: skip
    if system.lattice is not None:
        values |= {"energy_per": "cell", "rs": system.rs, "cell_volume": system.lattice.volume}
    return values


def _read_rows(path: Path, before: int) -> list[dict[str, str]]:
    """Complete rows with step < ``before``; a torn last line (a kill mid-write) is dropped."""
    if not path.is_file():
        return []
    rows = []
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            try:
                step = int(row["step"])
                float(row["energy"])
            except (TypeError, ValueError, KeyError):
                continue
            if step < before and None not in row.values():
                rows.append(row)
    rows.sort(key=lambda r: int(r["step"]))
    if [int(r["step"]) for r in rows] != list(range(len(rows))):
        raise InputError(
            f"{str(path)!r} is missing rows before step {before}; restore it or start a new run"
        )
    return rows


def _float(text: str | None) -> float:
    try:
        value = float(text) if text else 0.0
    except ValueError:
        return 0.0
    return value if math.isfinite(value) else 0.0


def atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)
