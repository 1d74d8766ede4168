"""Twist averaging: the electron gas trained at each twist of a grid, its energies averaged.

At one twist the energy of N electrons in a cell carries the shell structure of its
occupied plane waves (the kinetic energy's finite-size error above all); averaging the
energy over twists, at the same N, removes most of it (twist-averaged boundary
conditions: Lin, Zong and Ceperley, Phys. Rev. E 64, 016702 (2001)). The twists here are
the Monkhorst-Pack grid of ``m`` points a side, t_i = (j + 1/2) / m - 1/2 (j = 0 .. m - 1),
which leaves out the Gamma point, reduced by the cube's 48 symmetries (permutations and
sign changes of t's components, time reversal among them): twists that one symmetry
maps onto another have the same energy, so each class is trained once and weighted by
its size. Twists may also be listed one by one (``listed``), each of weight 1. The average
and its error bar (``average``):

    E = sum_c w_c E_c / sum_c w_c,   sigma^2 = sum_c w_c^2 sigma_c^2 / (sum_c w_c)^2,

the same for the Hartree-Fock energies of the twists' plane-wave determinants.

Each twist is a run directory of its own (``OUT/twist-NN``, a whole ``psijax train`` run),
so an average that stopped resumes twist by twist: a finished twist is read, an unfinished
one resumed from its checkpoint. ``OUT/twists.csv`` holds every twist, its weight, energy
and Hartree-Fock energy; ``OUT/summary.json`` the average.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
from collections.abc import Callable
from pathlib import Path

from psijax import config as config_lib
from psijax.curves.claim import claim, write_rows
from psijax.errors import InputError
from psijax.rundir.train_files import atomic_write
from psijax.system import electron_gas

MANIFEST = "twists.json"
MAX_GRID = 8  # points a side: 8^3 = 512 twists, 20 classes


@dataclasses.dataclass(frozen=True)
class Twist:
    twist: tuple[float, float, float]  # fractions of the reciprocal vectors
    weight: int  # twists of the grid in its class
    energy: float  # Ha per cell (the run's estimate)
    error: float
    hartree_fock: float  # of the twist's plane-wave determinant, Ha per cell
    steps: int
    seconds: float
    run: Path


@dataclasses.dataclass(frozen=True)
class TwistAverage:
    twists: list[Twist]
    out: Path
    electrons: int

    @property
    def energy(self) -> tuple[float, float]:
        """The weighted mean energy per cell and its error bar (module docstring)."""
        return average([(t.weight, t.energy, t.error) for t in self.twists])

    @property
    def hartree_fock(self) -> float:
        return average([(t.weight, t.hartree_fock, 0.0) for t in self.twists])[0]


def grid(m: int) -> list[tuple[tuple[float, float, float], int]]:
    """The classes of the ``m``-point Monkhorst-Pack grid under the cube's symmetries:
    (a representative twist, its class's size), the representative's components sorted
    by size, non-negative where the class holds such a twist."""
    if isinstance(m, bool) or not isinstance(m, int) or not 1 <= m <= MAX_GRID:
        raise InputError(
            f"twist grid {m!r}: give a whole number of twists a side from 1 to {MAX_GRID}, "
            "e.g. --twist-grid 2 (8 twists, one class) or 3 (27 twists, 4 classes)"
        )
    axis = [round((j + 0.5) / m - 0.5, 12) for j in range(m)]
    classes: dict[tuple[float, ...], int] = {}
    for t in itertools.product(axis, repeat=3):
        key = tuple(sorted(abs(c) for c in t))  # the class: sizes up to order and sign
        classes[key] = classes.get(key, 0) + 1
    return [((float(a), float(b), float(c)), n) for (a, b, c), n in sorted(classes.items())]


def average(values: list[tuple[float, float, float]]) -> tuple[float, float]:
    """(mean, error) of (weight, value, error) triples (module docstring)."""
    total = sum(w for w, _, _ in values)
    mean = sum(w * v for w, v, _ in values) / total
    error = math.sqrt(sum((w * e) ** 2 for w, _, e in values)) / total
    return mean, error


def listed(text: str) -> list[tuple[tuple[float, float, float], int]]:
    """Twists given one by one (``"t1 t2 t3; t1 t2 t3; ..."``), each of weight 1, none
    reduced by symmetry; a twist given twice is refused."""
    twists = [electron_gas.parse_twist(part) for part in text.split(";") if part.strip()]
    if not twists:
        raise InputError(f"twists {text!r}: give one or more 't1 t2 t3' separated by ';'")
    if len(set(twists)) < len(twists):
        raise InputError(f"twists {text!r} name one twist twice; give each twist once")
    return [(t, 1) for t in twists]


def twist_average(
    config: config_lib.Config,
    m: int | str,
    out: str | Path,
    *,
    progress: bool = True,
    force: bool = False,
    train: Callable | None = None,
) -> TwistAverage:
    """Train ``config`` (the electron gas, without a twist of its own) at each class of the
    ``m``-point grid in turn and average (module docstring); ``m`` a string lists the
    twists instead (``listed``). ``force`` starts over in ``out``; otherwise an average
    there of the same twists and settings is continued."""
    if train is None:
        from psijax.training.job import train
    if not electron_gas.is_named(config.system):
        raise InputError(
            "twist averaging is built for the electron gas; give --system heg with "
            "--electrons and --rs"
        )
    if config.twist is not None:
        raise InputError("the twists come from --twist-grid or --twists; leave --twist out")
    classes = listed(m) if isinstance(m, str) else grid(m)
    out = Path(out)
    at_twist = lambda t, run: dataclasses.replace(
        config, twist=" ".join(f"{c:.12g}" for c in t), out=str(run)
    )
    # every twist's system (refusing bad input before anything is written)
    gases = [electron_gas.from_config(at_twist(t, out)) for t, _ in classes]
    manifest = {
        "twists": [[list(t), w] for t, w in classes],
        "config": config_lib.to_dict(dataclasses.replace(config, out=str(out))),
    }
    claim(out, MANIFEST, manifest, force, "twist average")
    done: list[Twist] = []
    n = gases[0].n_electrons
    for k, ((twist, weight), gas) in enumerate(zip(classes, gases, strict=True)):
        run = out / f"twist-{k:02d}"
        if not (run / "summary.json").is_file():
            if progress:
                print(f"twist {k + 1}/{len(classes)}: {gas.twist}, weight {weight}", flush=True)
            train(at_twist(twist, run), progress=progress, resume=(run / "config.json").is_file())
        done.append(_read(run, twist, weight, gas.hartree_fock_energy()))
        _write(out, done, n, len(classes))
    return TwistAverage(done, out, n)


def _read(run: Path, twist, weight: int, hartree_fock: float) -> Twist:
    summary = json.loads((run / "summary.json").read_text())
    return Twist(
        twist, weight, summary["energy"], summary["energy_error"], hartree_fock,
        int(summary["steps_run"]), summary["seconds"], run,
    )  # fmt: skip


def _write(out: Path, twists: list[Twist], electrons: int, classes: int) -> None:
    """twists.csv (one row a twist) and summary.json (the average over the twists so far)."""
    rows = [
        {"t1": t.twist[0], "t2": t.twist[1], "t3": t.twist[2], "weight": t.weight,
         "energy": t.energy, "error": t.error, "hartree_fock": t.hartree_fock,
         "steps": t.steps, "seconds": t.seconds, "run": t.run.name}
        for t in twists
    ]  # fmt: skip
    write_rows(out / "twists.csv", rows)
    result = TwistAverage(twists, out, electrons)
    energy, error = result.energy
    summary = {
        "twists_done": len(twists), "classes": classes,
        "weights": sum(t.weight for t in twists),
        "energy": energy, "energy_error": error, "energy_per": "cell",
        "energy_per_electron": energy / electrons, "energy_per_electron_error": error / electrons,
        "hartree_fock": result.hartree_fock, "electrons": electrons,
    }  # fmt: skip
    atomic_write(out / "summary.json", json.dumps(summary, indent=2))
