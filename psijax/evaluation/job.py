"""Evaluation of a trained run: frozen parameters, a long MCMC chain, observables with errors.

>>> import psijax
>>> result = psijax.evaluate("runs/lih", steps=2000)
>>> print(result.estimates["energy"], result.estimates["s2"])

Restores the newest checkpoint of ``RUN`` (``psijax.load``), re-equilibrates the walkers
with the frozen parameters (adapting the sampler), then runs ``steps`` steps with the
sampler frozen and writes ``RUN/eval/``: ``metrics.csv`` (one row of walker means per
step), ``walkers.h5`` (the local energy of every walker at every step), ``summary.json``
(mean, blocking error, autocorrelation time and samples of every column) and ``eval.png``.
The energy and its components come from the same Hamiltonian as training's. The steps run
in training's host loop (``psijax.run.loop``): checkpoints, SIGTERM/SIGINT, lost processes,
rejected steps and ``--target-error`` behave as they do in training. The training's own
files are never touched. Walkers are sharded over the devices like training; with several
processes only process 0 writes.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import shutil
import time
from collections.abc import Callable
from pathlib import Path

import jax
import numpy as np

from psijax import hamiltonian, parallel, registry
from psijax.errors import InputError
from psijax.estimators import observables as observables_lib
from psijax.evaluation import step as eval_step
from psijax.evaluation.settings import KEEP_CHECKPOINTS, EvalSettings
from psijax.parallel.batching import auto_chunk
from psijax.run.compile_cache import use_compilation_cache
from psijax.run.context import RunFiles, running
from psijax.run.loop import Rejection
from psijax.run.progress import EvalProgress
from psijax.rundir import checkpoint, eval_files, lock, report
from psijax.runtime import configure
from psijax.statistics import Estimate, StopRule
from psijax.training import memory
from psijax.training.saved import check_run
from psijax.wavefunction import Wavefunction, load

EVAL_DIR = "eval"
REJECTION = Rejection(
    means="had no walker with a finite local energy",
    fix="check the trained run (psijax report RUN) or evaluate an earlier checkpoint",
)


@dataclasses.dataclass
class EvalResult:
    estimates: dict[str, Estimate]  # blocking estimate of every metrics column
    summary: dict  # what summary.json holds
    energies: np.ndarray  # per-step mean local energy
    out: Path
    reached_target: bool | None


def check_eval_dir(run: Path, force: bool) -> Path:
    out = run / EVAL_DIR
    if out.exists() and not out.is_dir():
        raise InputError(f"{str(out)!r} is a file, not a directory; move it away")
    if out.is_dir() and any(p.name != lock.NAME for p in out.iterdir()) and not force:
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
    checkpoint_every: int | None = None,
    stall_timeout: float | None = None,
    progress: bool = True,
    until: Callable[[list[dict[str, float]]], str | None] | None = None,
) -> EvalResult:
    """Evaluate the newest checkpoint of the training run ``run`` (module docstring; the
    defaults: ``psijax.evaluation.settings``). ``target_error`` (Hartree) stops once the
    whole evaluation's error bar is below it and its halves agree (``StopRule``, checked
    every 10 steps from step 200; ``steps`` is then the most). ``resume=True`` continues
    ``RUN/eval/`` from its newest checkpoint (every ``checkpoint_every`` steps and 10
    minutes, at the end, on SIGTERM/SIGINT) with its settings; ``steps`` and
    ``target_error`` may change. ``stall_timeout``: the step watch's floor (seconds;
    default: the training's). ``until(rows)``: the caller's own stopping rule over the
    metrics rows so far (one dict of column means per step), checked with the target
    error's rule; a reason it returns ends the evaluation. Bad input raises ``InputError``
    before anything is written.
    """
    started = time.perf_counter()
    configure()
    job = _resolve(run, resume, force, stall_timeout, dict(
        steps=steps, walkers=walkers, target_error=target_error, observables=observables,
        burn_in=burn_in, seed=seed, save_positions=save_positions,
        checkpoint_every=checkpoint_every, devices=devices,
    ))  # fmt: skip
    parts = _build(job, given_observables=observables is not None)
    state = _restored(job, parts) if resume else None
    start = 0 if state is None else int(np.asarray(parallel.to_host(state.step)))
    settings, wf, out = job.settings, job.wf, job.out
    show = EvalProgress(settings.steps, enabled=progress and job.lead)
    files = RunFiles(
        out, f"evaluation of {str(job.run)!r}", f"psijax evaluate {job.run} --resume",
        KEEP_CHECKPOINTS, job.stall_timeout, lock_fix="then evaluate again",
        unwritable=f"make {str(out)!r} a directory psijax can write, then evaluate again",
    )  # fmt: skip
    make_writer = lambda: _writer(job, parts, start if resume else None)
    with running(files, start, make_writer, show, lead=job.lead) as ctx:
        step, state = _launch(job, parts, state, show, ctx.watch)
        ctx.writer.start(_static(job, parts))
        energies: list[float] = [r["energy"] for r in ctx.writer.rows]
        first: list[float] = []  # when the first step of this call was done
        loop = ctx.loop(
            lambda s: step(wf.params, s), settings.steps,
            _recorder(ctx.writer, show, energies, first, started), identity=parts.identity,
            every_steps=settings.checkpoint_every, max_rejected=wf.config.max_rejected,
            rejection=REJECTION,
            converged=_stop_rule(settings.target_error, energies, until, ctx.writer.rows),
        )  # fmt: skip
        show.phase("evaluating", settings.steps, start=start)
        state = loop.run(state, start)
        return _summarise(job, parts, ctx.writer, loop, state, energies, first, start, started)


@dataclasses.dataclass(frozen=True)
class _Job:
    """An evaluation's checked inputs: the trained run, its wavefunction, the settings."""

    run: Path
    out: Path
    wf: Wavefunction
    settings: EvalSettings
    n_walkers: int
    mesh: object
    resume: bool
    stall_timeout: float
    lead: bool


@dataclasses.dataclass(frozen=True)
class _Parts:
    """The Hamiltonian, the observables with their per-walker values and columns, and the
    checkpoints' identity."""

    energy: object
    observed: tuple
    local_values: object
    columns: tuple
    identity: dict
    sampler: object  # the run's sampler, adapting (its state's layout, its width)


def _resolve(run, resume: bool, force: bool, stall_timeout, given: dict) -> _Job:
    """The run, its wavefunction and the settings (saved ones when resuming), all checked
    before anything is written."""
    if stall_timeout is not None and not stall_timeout >= 0:
        raise InputError(
            f"stall_timeout={stall_timeout} must be >= 0 seconds; give e.g. 120 (0: no watch)"
        )
    run = check_run(run)
    out = run / EVAL_DIR
    save_positions = given.pop("save_positions")
    if resume:
        if force:
            raise InputError("--resume and --force contradict each other; give only one")
        fixed = {k: given[k] for k in ("walkers", "observables", "burn_in", "seed")}
        saved = _saved_settings(out, fixed, save_positions)
        given["steps"] = saved["max_steps"] if given["steps"] is None else given["steps"]
        if given["target_error"] is None:
            given["target_error"] = saved["target_error"]
        given.update(walkers=saved["walkers"], observables=saved["observables"],
                     burn_in=saved["burn_in_steps"], seed=saved["seed"])  # fmt: skip
        save_positions = saved["positions"]
    settings = EvalSettings.make(
        given["steps"], given["walkers"], given["burn_in"], given["target_error"],
        given["observables"], given["seed"], save_positions, given["checkpoint_every"],
    )  # fmt: skip
    mesh = parallel.make_mesh(given["devices"])
    if not resume:
        parallel.check_on_lead(lambda: check_eval_dir(run, force))
    wf = load(run, mesh=mesh)
    use_compilation_cache(wf.config.compilation_cache)
    n_walkers = settings.walkers or wf.config.walkers
    parallel.check_walkers(n_walkers, mesh)
    if stall_timeout is None:
        stall_timeout = wf.config.stall_timeout
    return _Job(run, out, wf, settings, n_walkers, mesh, resume, stall_timeout,
                jax.process_index() == 0)  # fmt: skip


def _build(job: _Job, given_observables: bool) -> _Parts:
    wf, settings = job.wf, job.settings
    identity = checkpoint.identity_of(
        wf.molecule.fingerprint(),
        {"training_step": wf.step, "walkers": job.n_walkers, "seed": settings.seed,
         "observables": list(settings.observables)},
    )  # fmt: skip
    energy = hamiltonian.for_config(wf.molecule, wf.config)
    observed, local_values, columns = registry.eigenstates(wf.config).observed(
        settings.observables, energy, wf.network, wf.molecule, given=given_observables
    )
    sampler = registry.sampler(wf.config, wf.molecule)
    return _Parts(energy, observed, local_values, columns, identity, sampler)


def _restored(job: _Job, parts: _Parts):
    """The newest checkpoint of the evaluation being resumed."""
    template = eval_step.abstract_state(
        job.n_walkers, job.wf.network.n_electrons, job.wf.walkers.dtype, job.mesh,
        parts.sampler,
    )  # fmt: skip
    reader = checkpoint.Checkpoints(job.out, read_only=True)
    try:
        return reader.restore(template, parts.identity)
    finally:
        reader.close()


def _writer(job: _Job, parts: _Parts, resume_step: int | None) -> eval_files.EvalWriter:
    """The evaluation's files; a new evaluation first removes the old one's."""
    if job.lead and resume_step is None:
        for path in job.out.iterdir():
            if path.name != lock.NAME:
                shutil.rmtree(path) if path.is_dir() else path.unlink()
    return eval_files.EvalWriter(
        job.out, parts.columns, job.n_walkers, job.wf, enabled=job.lead,
        save_positions=job.settings.save_positions, resume_step=resume_step,
    )  # fmt: skip


def _launch(job: _Job, parts: _Parts, state, show, watch):
    """The compiled evaluation step (within the device's memory) and the state it starts
    from: the restored one, or the trained walkers re-equilibrated with frozen parameters."""
    wf, settings, mesh = job.wf, job.settings, job.mesh
    log_abs = wf.network.log_abs
    chunk = wf.config.chunk_size or auto_chunk(job.n_walkers, mesh.devices.size)
    budget = memory.budget()  # a collective with several processes: on this thread
    if state is None:
        saved_walkers = np.asarray(parallel.to_host(wf.walkers))
        state = eval_step.initial_state(
            log_abs,
            wf.params,
            saved_walkers,
            wf.sampler_state,
            job.n_walkers,
            settings.seed,
            mesh,
        )
        if settings.burn_in:
            watch.disarm("re-equilibrating the walkers")
            show.phase("re-equilibrating the walkers", settings.burn_in)
            equilibrate = eval_step.make_equilibrate(log_abs, parts.sampler, mesh, chunk)
            state = equilibrate(wf.params, state, settings.burn_in)
    watch.disarm("compiling the evaluation step")
    build = lambda chunk_size: eval_step.make_eval_step(
        log_abs, parts.local_values, registry.sampler(wf.config, wf.molecule, adapt=False),
        mesh, chunk_size, functools.partial(observables_lib.combine, parts.observed),
        random=parts.energy.needs_key, positions=settings.save_positions,
    )  # fmt: skip
    # before the loop, whose watch times every step; within the device's memory
    step, _ = memory.compile_evaluation(
        build, chunk, (wf.params, state), budget, walkers=job.n_walkers,
        devices=mesh.devices.size, kept=wf.config.chunk_size is not None, note=show.note,
    )  # fmt: skip
    return step, state


def _static(job: _Job, parts: _Parts) -> dict:
    """The evaluation's settings as summary.json keeps them."""
    wf, settings = job.wf, job.settings
    return {
        "run": str(job.run),
        "system": wf.config.system,
        "checkpoint_step": wf.step,
        "walkers": job.n_walkers,
        "burn_in_steps": settings.burn_in,
        "mcmc_moves": wf.config.mcmc_moves,
        "devices": int(job.mesh.devices.size),
        "processes": jax.process_count(),
        "target_error": settings.target_error,
        "max_steps": settings.steps,
        "seed": settings.seed,
        "observables": list(settings.observables),
        "positions": settings.save_positions,
    }


def _recorder(writer, show, energies: list[float], first: list[float], started: float):
    """What the evaluation does with each step's metrics: a row, walkers.h5, the display."""

    def on_metrics(i: int, m: dict) -> None:
        if not first:
            first.append(time.perf_counter())
        means = {k: v for k, v in m.items() if k not in eval_step.PER_WALKER}
        energies.append(means["energy"])
        seconds = time.perf_counter() - started
        writer.row(i, means, m["local_energy"], m.get("positions"), seconds)
        show.step(i, means, energies)

    return on_metrics


def _summarise(job, parts, writer, loop, state, energies, first, start, started) -> EvalResult:
    """summary.json (every column's estimate), eval.png and the result."""
    settings = job.settings
    n_done = len(energies)
    rate = None
    if first and n_done - start > 1:
        elapsed = max(time.perf_counter() - first[0], 1e-9)
        rate = job.n_walkers * (n_done - start - 1) / elapsed
    reached = None if settings.target_error is None else loop.converged_at is not None
    if loop.converged_reason is not None:
        reached = True
    info = {
        **_static(job, parts),
        "steps": n_done,
        "width": float(np.asarray(parallel.to_host(parts.sampler.width(state.sampler)))),
        "reached_target": reached,
        "seconds": round(time.perf_counter() - started, 2),
        "walker_steps_per_second": None if rate is None else round(rate, 1),
    }
    writer.close()
    summary, estimates = report.finish(
        job.out, job.wf.run, job.wf.config.system, writer.columns, parts.observed, writer.rows,
        info, units=dict.fromkeys(parts.energy.columns, "Ha"), enabled=job.lead,
    )  # fmt: skip
    return EvalResult(estimates, summary, np.asarray(energies), job.out, reached)


def _stop_rule(target_error: float | None, energies: list[float], until=None, rows=()):
    """--target-error over the whole evaluation (training's rule with the whole chain as
    its window: its two halves are compared for drift), and the caller's ``until``."""
    if target_error is None and until is None:
        return None
    rule = None if target_error is None else StopRule(target_error, fraction=1.0)

    def converged() -> str | None:
        if rule is not None:
            verdict = rule.check(energies)
            if verdict.stop:
                return verdict.reason
        return None if until is None else until(rows)

    return converged


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
