"""Evaluation of a trained run: frozen parameters, a long MCMC chain, observables with errors.

>>> import psijax
>>> result = psijax.evaluate("runs/lih", steps=2000)
>>> print(result.estimates["energy"], result.estimates["s2"])

Restores the newest checkpoint of ``RUN`` (``psijax.load``), re-equilibrates the walkers
with the frozen parameters (adapting the proposal width), then runs ``steps`` MCMC steps
with a fixed width and writes ``RUN/eval/``: ``metrics.csv`` (one row of walker means per
step), ``walkers.h5`` (the local energy of every walker at every step), ``summary.json``
(mean, blocking error, autocorrelation time and samples of every column) and ``eval.png``.
The training's own files are never touched. Walkers are sharded over the devices like
training; with several processes only process 0 writes.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import shutil
import time
from pathlib import Path

import jax
import numpy as np

from psijax import observables as observables_lib
from psijax import parallel
from psijax.batching import auto_chunk
from psijax.errors import InputError
from psijax.run import checkpoint, eval_report, eval_step
from psijax.run.compile_cache import use_compilation_cache
from psijax.run.loop import Interrupted, StopSignals
from psijax.stats import Estimate, blocking_estimate
from psijax.wavefunction import check_run, load

EVAL_DIR = "eval"
DEFAULT_STEPS = 2000
TARGET_MAX_STEPS = 100_000  # the cap on a --target-error evaluation without --steps
MIN_TARGET_STEPS = 128  # blocking needs this many steps before an error bar is trusted
CHECK_EVERY = 32  # steps between --target-error checks


@dataclasses.dataclass
class EvalResult:
    estimates: dict[str, Estimate]  # blocking estimate of every metrics column
    summary: dict  # what summary.json holds
    energies: np.ndarray  # per-step mean local energy
    out: Path
    reached_target: bool | None


@dataclasses.dataclass(frozen=True)
class EvalSettings:
    """What an evaluation does; checked once, before anything is read or written."""

    steps: int
    walkers: int | None
    burn_in: int
    target_error: float | None
    observables: tuple[str, ...]
    seed: int
    save_positions: bool

    @classmethod
    def make(
        cls,
        steps=None,
        walkers=None,
        burn_in=100,
        target_error=None,
        observable_names=None,
        seed=0,
        save_positions=False,
    ) -> EvalSettings:
        if target_error is not None:
            target_error = _number("target_error", target_error)
            if not (math.isfinite(target_error) and target_error > 0):
                raise InputError(
                    f"target_error={target_error} must be a positive number of Hartree, e.g. 1e-4"
                )
        if steps is None:
            steps = DEFAULT_STEPS if target_error is None else TARGET_MAX_STEPS
        steps = _whole("steps", steps, minimum=2)
        if walkers is not None:
            walkers = _whole("walkers", walkers, minimum=1)
        burn_in = _whole("burn_in", burn_in, minimum=0)
        seed = _whole("seed", seed, minimum=0)
        names = observables_lib.parse(observable_names)
        return cls(steps, walkers, burn_in, target_error, names, seed, bool(save_positions))


def _whole(name: str, value, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise InputError(f"{name}={value!r} must be a whole number >= {minimum}")
    try:
        number = float(value)
    except ValueError:
        raise InputError(f"{name}={value!r} must be a whole number >= {minimum}") from None
    if not number.is_integer() or number < minimum:
        raise InputError(f"{name}={value!r} must be a whole number >= {minimum}")
    return int(number)


def _number(name: str, value) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        raise InputError(f"{name}={value!r} is not a number; give e.g. 1e-4") from None


def check_eval_dir(run: Path, force: bool) -> Path:
    out = run / EVAL_DIR
    if out.exists() and not out.is_dir():
        raise InputError(f"{str(out)!r} is a file, not a directory; move it away")
    if out.is_dir() and any(out.iterdir()) and not force:
        raise InputError(
            f"{str(out)!r} already holds an evaluation; pass --force to replace it, or "
            f"reprint it with psijax report {run}"
        )
    return out


def evaluate(
    run: str | Path,
    *,
    steps: int | None = None,
    walkers: int | None = None,
    target_error: float | None = None,
    observables: str | list[str] | None = None,
    burn_in: int | None = None,
    seed: int | None = None,
    devices: int | None = None,
    save_positions: bool = False,
    force: bool = False,
    resume: bool = False,
    checkpoint_every: int = 200,
    progress: bool = True,
) -> EvalResult:
    """Evaluate the newest checkpoint of the training run ``run``; see the module docstring.

    ``target_error`` (Hartree) stops as soon as the blocking error of the energy is below it
    (checked every 32 steps from step 128; ``steps`` is then the most steps it may take).
    ``resume=True`` continues the evaluation in ``RUN/eval/`` from its newest checkpoint
    (written every ``checkpoint_every`` steps, at the end and on SIGTERM/SIGINT) with its
    own settings; ``steps`` and ``target_error`` may change.
    Every input is checked before anything is written; bad input raises ``InputError``.
    """
    started = time.perf_counter()
    run = check_run(run)
    out = run / EVAL_DIR
    given = dict(walkers=walkers, observables=observables, burn_in=burn_in, seed=seed)
    if resume:
        if force:
            raise InputError("--resume and --force contradict each other; give only one")
        saved = _saved_settings(out, given, save_positions)
        steps = saved["max_steps"] if steps is None else steps
        target_error = saved["target_error"] if target_error is None else target_error
        walkers, observables = saved["walkers"], saved["observables"]
        burn_in, seed, save_positions = saved["burn_in_steps"], saved["seed"], saved["positions"]
    settings = EvalSettings.make(
        steps, walkers, 100 if burn_in is None else burn_in, target_error, observables,
        seed or 0, save_positions,
    )  # fmt: skip
    every = _whole("checkpoint_every", checkpoint_every, minimum=1)
    mesh = parallel.make_mesh(devices)
    if not resume:
        parallel.check_on_lead(lambda: check_eval_dir(run, force))
    wf = load(run, mesh=mesh)
    use_compilation_cache(wf.config.compilation_cache)
    n_walkers = settings.walkers or wf.config.walkers
    parallel.check_walkers(n_walkers, mesh)
    identity = checkpoint.identity_of(
        wf.molecule.fingerprint(),
        {"training_step": wf.step, "walkers": n_walkers, "seed": settings.seed,
         "observables": list(settings.observables)},
    )  # fmt: skip
    state, start = None, 0
    if resume:
        reader = checkpoint.Checkpoints(out, read_only=True)
        try:
            state = reader.restore(eval_step.abstract_state(wf, n_walkers, mesh), identity)
        finally:
            reader.close()
        start = int(np.asarray(parallel.to_host(state.step)))

    # ---- every input is checked; from here on files are written (process 0 only)
    lead = jax.process_index() == 0
    if lead and out.is_dir() and not resume:
        shutil.rmtree(out)
    if state is None:
        state = eval_step.initial_state(wf, n_walkers, settings.seed, mesh)
    chunk = wf.config.chunk_size or auto_chunk(n_walkers, mesh.devices.size)
    from psijax.registry import laplacian_operator

    op = laplacian_operator(wf.config.laplacian, wf.molecule.n_electrons)
    observed = observables_lib.build(settings.observables, wf.molecule, wf.network)
    local = observables_lib.make_local_values(wf.apply, observed, op)
    show = eval_report.EvalProgress(settings.steps, enabled=progress and lead)
    if settings.burn_in and not resume:
        show.phase("re-equilibrating the walkers", settings.burn_in)
        equilibrate = eval_step.make_equilibrate(wf.apply, wf.config.mcmc_moves, mesh, chunk)
        state = equilibrate(wf.params, state, settings.burn_in)
    step = eval_step.make_eval_step(
        wf.apply, local, wf.config.mcmc_moves, mesh, chunk, donate=not settings.save_positions,
        combine=functools.partial(observables_lib.combine, observed),
    )  # fmt: skip
    columns = [c for o in observed for c in o.columns]
    writer = eval_report.EvalWriter(
        out, columns, n_walkers, wf, enabled=lead, save_positions=settings.save_positions,
        resume_step=start if resume else None,
    )  # fmt: skip
    saver = checkpoint.Checkpoints(out, keep=2)
    static = {
        "run": str(run),
        "system": wf.config.system,
        "checkpoint_step": wf.step,
        "walkers": n_walkers,
        "burn_in_steps": settings.burn_in,
        "mcmc_moves": wf.config.mcmc_moves,
        "devices": int(mesh.devices.size),
        "processes": jax.process_count(),
        "target_error": settings.target_error,
        "max_steps": settings.steps,
        "seed": settings.seed,
        "observables": list(settings.observables),
        "positions": settings.save_positions,
    }
    writer.start(static)
    show.phase("evaluating", settings.steps, start=start)
    reached = None if settings.target_error is None else False
    energies: list[float] = [r["energy"] for r in writer.rows]
    t_first = None
    pending = None
    with StopSignals() as signals:
        try:
            for i in range(start, settings.steps):
                new_state, metrics, e_walkers = step(wf.params, state)
                if pending is not None:
                    _emit(pending, writer, show, energies, started)
                positions = (
                    new_state.walkers if settings.save_positions else None
                )  # not donated then
                pending = (i, metrics, e_walkers, positions)
                state = new_state
                if i == start:
                    jax.block_until_ready(metrics)
                    t_first = time.perf_counter()
                stop = signals.received is not None and jax.process_count() == 1
                if stop or (i + 1) % every == 0:
                    _emit(pending, writer, show, energies, started)
                    pending = None
                    writer.flush()
                    saver.save(state, identity)
                if stop:
                    saver.wait()
                    raise Interrupted(signals.received, i + 1, True)
                if settings.target_error is not None and _check_due(i + 1):
                    if pending is not None:
                        _emit(pending, writer, show, energies, started)
                        pending = None
                    if blocking_estimate(energies).error < settings.target_error:
                        reached = True
                        break
            if pending is not None:
                _emit(pending, writer, show, energies, started)
            writer.flush()
            saver.save(state, identity)
        finally:
            show.close()
            writer.close()
            saver.close()
    seconds = time.perf_counter() - started
    n_done = len(energies)
    rate = None
    if t_first is not None and n_done - start > 1:
        rate = n_walkers * (n_done - start - 1) / max(time.perf_counter() - t_first, 1e-9)
    info = {
        **static,
        "steps": n_done,
        "width": float(np.asarray(parallel.to_host(state.width))),
        "reached_target": reached,
        "seconds": round(seconds, 2),
        "walker_steps_per_second": None if rate is None else round(rate, 1),
    }
    summary, estimates = eval_report.finish(out, wf, observed, writer.rows, info, enabled=lead)
    return EvalResult(estimates, summary, np.asarray(energies), out, reached)


def _saved_settings(out: Path, given: dict, positions: bool) -> dict:
    """The settings of the evaluation in ``out`` (for --resume); refuses changed ones."""
    try:
        saved = json.loads((out / "summary.json").read_text())
    except (OSError, ValueError):
        saved = None
    if not isinstance(saved, dict) or not {"walkers", "seed", "max_steps"} <= saved.keys():
        raise InputError(f"{str(out)!r} holds no evaluation to resume; start one without --resume")
    names = {"walkers": "walkers", "burn_in": "burn_in_steps", "seed": "seed"}
    for key, value in given.items():
        if value is None:
            continue
        was = saved.get(names.get(key, key))
        now = list(observables_lib.parse(value)) if key == "observables" else value
        if now != was:
            raise InputError(
                f"{key} cannot change when resuming an evaluation (it has {was!r}, given "
                f"{value!r}); drop it, or start a new evaluation with --force"
            )
    if positions and not saved.get("positions"):
        raise InputError("--save-positions cannot be added when resuming; drop it or --force")
    saved.setdefault("positions", False)
    return saved


def _check_due(done: int) -> bool:
    return done >= MIN_TARGET_STEPS and done % CHECK_EVERY == 0


def _emit(pending, writer, show, energies: list[float], started: float) -> None:
    i, metrics, e_walkers, positions = pending
    host = {k: float(v) for k, v in jax.device_get(metrics).items()}
    energies.append(host["energy"])
    per_walker = parallel.to_host(e_walkers)
    where = None if positions is None else parallel.to_host(positions)
    writer.row(i, host, per_walker, where, time.perf_counter() - started)
    show.step(i, host, energies)
