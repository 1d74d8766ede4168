"""An evaluation's files in ``RUN/eval/``: ``metrics.csv`` and ``walkers.h5``.

``metrics.csv`` has one row per step: the walker mean of every observable column, the
variance of the local energy over the walkers, the acceptance and the walkers left out for
a non-finite local energy. ``walkers.h5`` holds ``local_energy`` ``[step, walker]``
(Hartree) and, when asked for, ``positions`` ``[step, walker, electron, 3]`` (bohr).
Only process 0 writes; the other processes get a writer that keeps the rows and writes
nothing.
"""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from psijax.errors import InputError
from psijax.rundir.train_files import atomic_write

TAIL = ("variance", "acceptance", "nonfinite_walkers", "reset_walkers")
COUNTS = ("nonfinite_walkers", "reset_walkers")  # summed over the steps, not averaged
UNITS = {
    "energy": "Ha", "kinetic": "Ha", "electron_nucleus": "Ha", "electron_electron": "Ha",
    "nucleus_nucleus": "Ha", "variance": "Ha^2", "s2": "", "dipole_x": "e*bohr",
    "dipole_y": "e*bohr", "dipole_z": "e*bohr", "acceptance": "",
}  # fmt: skip


def unit_of(column: str) -> str:
    return "Ha/bohr" if column.startswith("force_") else UNITS.get(column, "")


class EvalWriter:
    """Writes ``metrics.csv``, ``walkers.h5`` and the first ``summary.json``; keeps the rows.

    ``resume_step``: keep the rows and per-walker arrays of the steps before it, drop the
    rest (written after the checkpoint being resumed) and append from there.
    """

    def __init__(
        self, out: Path, columns, n_walkers: int, wf, *, enabled=True, save_positions=False,
        resume_step: int | None = None,
    ):  # fmt: skip
        self.out, self.enabled = out, enabled
        self.columns = ["step", *columns, *TAIL, "seconds"]
        self.rows: list[dict[str, float]] = []
        if resume_step is not None:
            rows = read_rows(out / "metrics.csv") if (out / "metrics.csv").is_file() else []
            self.rows = [r for r in rows if r["step"] < resume_step]
            if [int(r["step"]) for r in self.rows] != list(range(resume_step)):
                raise InputError(
                    f"{str(out / 'metrics.csv')!r} is missing rows before step {resume_step}; "
                    "start a new evaluation with --force"
                )
        if not enabled:
            return
        import h5py

        out.mkdir(parents=True, exist_ok=True)
        self._file = open(out / "metrics.csv", "w", newline="")  # noqa: SIM115
        self._csv = csv.DictWriter(self._file, self.columns, extrasaction="ignore")
        self._csv.writeheader()
        for row in self.rows:
            self._csv.writerow({k: int(v) if k == "step" else v for k, v in row.items()})
        if resume_step is not None:
            self._h5 = h5py.File(out / "walkers.h5", "a")
            self._energy = self._h5["local_energy"]
            self._positions = self._h5.get("positions")
            for data in (self._energy, self._positions):
                if data is not None:
                    data.resize(resume_step, axis=0)
            return
        self._h5 = h5py.File(out / "walkers.h5", "w")
        self._h5.attrs.update(
            system=wf.config.system, checkpoint_step=wf.step, unit_energy="Hartree",
            unit_length="bohr", n_up=wf.molecule.n_up, n_down=wf.molecule.n_down,
        )  # fmt: skip
        self._energy = self._h5.create_dataset(
            "local_energy", (0, n_walkers), maxshape=(None, n_walkers), dtype="f4",
            chunks=(max(1, min(256, 2**20 // (4 * n_walkers))), n_walkers),
        )  # fmt: skip
        self._positions = None
        if save_positions:
            shape = (n_walkers, wf.network.n_electrons, 3)
            self._positions = self._h5.create_dataset(
                "positions", (0, *shape), maxshape=(None, *shape), dtype="f4",
                chunks=(1, *shape),
            )  # fmt: skip

    def start(self, info: dict[str, Any]) -> None:
        if self.enabled:
            atomic_write(self.out / "summary.json", json.dumps({"status": "running", **info}))

    def row(self, step, metrics, per_walker, positions, seconds) -> None:
        values = {"step": step, **metrics, "seconds": round(seconds, 3)}
        self.rows.append(values)
        if not self.enabled:
            return
        self._csv.writerow(values)
        n = self._energy.shape[0]
        self._energy.resize(n + 1, axis=0)
        self._energy[n] = np.asarray(per_walker, np.float32)
        if self._positions is not None:
            self._positions.resize(n + 1, axis=0)
            self._positions[n] = np.asarray(positions, np.float32)
        if n % 50 == 0:
            self._file.flush()
            self._h5.flush()

    def flush(self) -> None:
        """Make every row so far durable (before each checkpoint)."""
        if self.enabled:
            self._file.flush()
            os.fsync(self._file.fileno())
            self._h5.flush()

    def close(self) -> None:
        if self.enabled and not self._file.closed:
            self._file.close()
            self._h5.close()


def read_rows(path: Path) -> list[dict[str, float]]:
    """The complete rows of a metrics.csv (a torn last line of a running run is dropped)."""
    rows = []
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            if None in row.values() or None in row:
                continue
            try:
                rows.append({k: float(v) for k, v in row.items() if v != ""})
            except ValueError:
                continue
    return rows
