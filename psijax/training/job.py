"""The whole job in one call: molecule -> trained wavefunction -> energy with an error bar.

>>> import psijax
>>> result = psijax.train(system="H2", steps=500, out="runs/h2")
>>> print(result.energy, result.exact)
>>> psijax.train(out="runs/h2", resume=True, steps=1000)  # continue it to 1000 steps

Every input is checked before anything is written: a bad molecule, config, device count,
basis or checkpoint raises ``InputError`` and leaves the run directory as it was.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

import jax
import numpy as np

from psijax import config as config_lib
from psijax import hamiltonian, parallel, registry, system
from psijax.ansatz import Ansatz
from psijax.errors import InputError
from psijax.estimators import training as estimators_lib
from psijax.run.compile_cache import use_compilation_cache
from psijax.run.loop import CheckpointPolicy, HostLoop, StopSignals, step_watch
from psijax.run.progress import Progress
from psijax.rundir import checkpoint, lock, train_files
from psijax.statistics import Estimate, StopRule, tail_estimate
from psijax.statistics import states as state_stats
from psijax.system import ecp
from psijax.training import memory, pretrain_states
from psijax.training.start import fresh_state
from psijax.training.state import abstract_train_state
from psijax.training.step import StepConfig, make_step
from psijax.types import Params


@dataclasses.dataclass
class TrainResult:
    molecule: system.Molecule
    energy: Estimate  # blocking analysis of the trailing eval_fraction of the run
    exact: float | None
    energies: np.ndarray  # per-step mean local energy
    params: Params
    seconds: float
    out: Path  # the run directory: metrics.csv, summary.json, config.json, checkpoints/
    config: config_lib.Config | None = None  # the resolved config of the run
    network: Ansatz | None = None  # network.log_abs(params, walker) is log|psi|
    converged_at: int | None = None  # the step --target-error stopped the run at
    # Several states: each one's energy, lowest first (``energy`` is then their sum).
    states: list[Estimate] | None = None

    @property
    def error_vs_exact(self) -> float | None:
        return None if self.exact is None else self.energy.mean - self.exact


def make_config(
    config: config_lib.Config | None = None, *, resume: bool = False, **overrides
) -> config_lib.Config:
    """The run's config: ``config`` (or defaults) with ``overrides``; for ``resume``, the
    config saved in ``out`` with only resumable fields overridden."""
    overrides = _molecule_as_text(config_lib.flatten(overrides))
    if not resume:
        return config_lib.from_dict(overrides, config)
    out = overrides.get("out", config.out if config else None)
    if out is None:
        raise InputError("resume needs the run directory; give --resume DIR (or out=DIR)")
    saved = train_files.read_config(Path(out))
    given = {**(config_lib.to_dict(config) if config else {}), **overrides}
    return config_lib.for_resume(saved, given)


def _molecule_as_text(overrides: dict) -> dict:
    """A ``system`` given as a psijax ``Molecule`` or a pyscf ``Mole`` becomes its atom
    string in bohr with its charge and spin, so that the config stays plain text."""
    given = overrides.get("system")
    if given is None or isinstance(given, str | os.PathLike):
        return overrides
    mol = system.resolve(
        given, charge=overrides.get("charge"), spin=overrides.get("spin"), ecp=overrides.get("ecp")
    )
    text = dict(system=mol.atom_string(), charge=mol.charge, spin=mol.spin, unit="bohr")
    if mol.ecp:
        pairs = dict(zip(mol.symbols, mol.ecp, strict=True))
        text["ecp"] = " ".join(f"{s}:{e}" for s, e in pairs.items() if e is not None)
    return overrides | text


OnStep = Callable[[int, dict[str, float]], None]


def train(
    config: config_lib.Config | None = None,
    *,
    progress: bool = True,
    force: bool = False,
    resume: bool = False,
    on_step: OnStep | None = None,
    **overrides,
) -> TrainResult:
    """Train on ``config`` (or the defaults) with keyword ``overrides``; see ``Config``.

    ``system`` may be a preset name, an atom string, an .xyz path, a ``psijax.Molecule``
    or a built pyscf ``Mole``. ``resume=True`` continues the run in ``out`` from its newest
    checkpoint (or from the start if it has none yet), exactly as if it had never stopped.
    ``on_step(step, metrics)`` is called on process 0 after every step with that step's
    metrics as Python floats (the columns of metrics.csv), one step late; an exception it
    raises stops the run (the last checkpoint stays).
    """
    started = time.perf_counter()
    config = make_config(config, resume=resume, **overrides)
    use_compilation_cache(config.compilation_cache)
    molecule = system.for_config(config)
    mesh = parallel.make_mesh(config.devices)
    parallel.check_walkers(config.walkers, mesh)
    if config.pretrain_steps:
        molecule.to_pyscf(config.basis)  # an unknown basis fails now, before any file is written
        if config.states > 1:
            pretrain_states.check_basis(molecule, config.states, config.basis)
    out = Path(config.out)
    if not resume:
        parallel.check_on_lead(lambda: train_files.check_new(out, force))

    net = registry.ansatz(molecule, config)
    local_energy = hamiltonian.for_config(molecule, config).local_energy(net)
    optimizer = registry.optimizer(config)
    sampler = registry.sampler(config, molecule)
    template = abstract_train_state(net, optimizer, config.walkers, net.n_electrons, mesh)
    identity = checkpoint.identity_of(molecule.fingerprint(), config_lib.identity(config))
    lead = jax.process_index() == 0
    k = config.states
    show = Progress(
        config.steps, enabled=progress and lead, exact=molecule.exact_energy if k == 1 else None,
        eval_fraction=config.eval_fraction, states=k,
    )  # fmt: skip
    show.note(_header(molecule, config, template, mesh))
    show.note(net.describe())
    state = None
    if resume and (out / checkpoint.SUBDIR).is_dir():
        reader = checkpoint.Checkpoints(out, read_only=True)
        if reader.latest() is not None:
            t0 = time.perf_counter()
            state = reader.restore(template, identity)
            show.note(
                f"restored step {reader.latest()} from {out / checkpoint.SUBDIR} "
                f"({time.perf_counter() - t0:.1f} s)"
            )
        reader.close()
    if resume and state is None:
        show.note(f"no checkpoint in {out} yet: starting the run from step 0")
    start = 0 if state is None else int(parallel.to_host(state.step))

    # ---- every input is checked; from here on files are written
    # (one process at a time: psijax.rundir.lock)
    with lock.holding(out / lock.NAME, f"training run in {str(out)!r}", enabled=lead):
        writer = train_files.RunWriter(
            out, molecule, config, resume_step=start, resuming=resume, enabled=lead
        )
        estimators = estimators_lib.for_states(k)
        show.follow(writer.energies)  # the running estimate includes a resumed run's rows
        checkpoints = checkpoint.Checkpoints(out, keep=config.keep_checkpoints)
        resume_command = f"psijax train --resume {out}"
        watch = step_watch(out, start, writer.flush, resume_command, config.stall_timeout)
        try:
            with StopSignals() as signals, watch:
                build = lambda settings: make_step(
                    net.log_abs,
                    local_energy,
                    optimizer,
                    settings,
                    mesh,
                    template,
                    sampler,
                    estimators,
                )
                # Compile the step (the largest launch cost) while pretraining and burn-in run,
                # within the memory one device can give it (psijax.training.memory). Its
                # compiling waits for pretraining's and burn-in's programs (``_Gate``).
                budget = memory.budget()  # a collective with several processes: here, not below
                notes: list[str] = []  # the compiler thread's, shown from this one
                fresh = state is None
                show.note("compiling the training step" + " (in the background)" * fresh)
                t_compile = time.perf_counter()
                gate = _Gate()
                with concurrent.futures.ThreadPoolExecutor(1) as pool:
                    compiling = pool.submit(_timed, lambda: memory.compile_within(
                        build, step_config(config), template, budget, config=config, mesh=mesh,
                        optimizer=optimizer, note=notes.append, wait=gate.wait,
                    ))  # fmt: skip
                    try:
                        if fresh:
                            state = fresh_state(
                                net, optimizer, sampler, molecule, config, mesh, show, watch,
                                compiled=gate.open,
                            )  # fmt: skip
                    except BaseException:
                        gate.close()  # the error shows now, not after the step's compile
                        raise
                    gate.open()
                    if fresh and not compiling.done():
                        show.note("waiting for the compiler")
                    (step, _), compiled_at = compiling.result()
                for line in notes:
                    show.note(line)
                show.note(f"compiled the training step ({compiled_at - t_compile:.1f} s)")

                def on_metrics(i: int, m: dict[str, float]) -> None:
                    if k > 1:
                        m = m | state_stats.step_energies(m, k)
                    writer.row(i, m, time.perf_counter() - started)
                    show.step(i, m)
                    if on_step is not None and lead:
                        on_step(i, m)

                loop = HostLoop(
                    step=step,
                    n_steps=config.steps,
                    on_metrics=on_metrics,
                    checkpoints=checkpoints,
                    identity=identity,
                    policy=CheckpointPolicy(
                        config.checkpoint_every, config.checkpoint_minutes, config.keep_checkpoints
                    ),
                    max_rejected=config.max_rejected,
                    signals=signals,
                    watch=watch,
                    resume=resume_command,
                    before_save=writer.flush,
                    converged=_stop_rule(config, writer.energies),
                )
                show.phase("training", config.steps, start=start)
                if config.target_error is not None:
                    show.note(
                        "stopping early once the energy's error bar is below "
                        f"{config.target_error:g} Ha and it no longer drifts "
                        "(psijax.statistics.stopping)"
                    )
                state = loop.run(state, start)
        finally:
            show.close()
            writer.close()
            checkpoints.close()

        if loop.converged_at is not None:
            show.note(f"converged at step {loop.converged_at}: {loop.converged_reason}")
        energies = np.asarray(writer.energies)
        finite = energies[np.isfinite(energies)]
        if finite.size < 2:
            raise InputError("fewer than two finite energies; run more steps")
        estimate = tail_estimate(finite, config.eval_fraction)
        per_state = None
        if k > 1:
            per_state = state_stats.tail(writer.matrices, config.eval_fraction)
            show.note("states: " + "  ".join(f"E{i} = {e} Ha" for i, e in enumerate(per_state)))
        seconds = time.perf_counter() - started
        result = TrainResult(
            molecule, estimate, molecule.exact_energy if k == 1 else None, energies, state.params,
            seconds, out, config=config, network=net, converged_at=loop.converged_at,
            states=per_state,
        )  # fmt: skip
        writer.finish(
            estimate, energies, seconds, config, converged_at=loop.converged_at, states=per_state
        )
        return result


def _stop_rule(config: config_lib.Config, energies: list[float]):
    """The --target-error check on the run's per-step energies (None without a target)."""
    if config.target_error is None:
        return None
    rule = StopRule(config.target_error, config.eval_fraction)

    def converged() -> str | None:
        verdict = rule.check(energies)
        return verdict.reason if verdict.stop else None

    return converged


class _Gate:
    """When the training step's compile may start. XLA's CPU client generates the code of
    every compile on one pool of threads, in the order the work arrives: had the step's
    compile started first, pretraining's and burn-in's programs would wait for all of it
    (docs/benchmarks.md, "Launch"). ``open()`` once they are compiled; ``close()`` when the
    start failed, so that the compile thread stops instead of compiling."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self._wanted = True

    def open(self) -> None:
        self._event.set()

    def close(self) -> None:
        self._wanted = False
        self._event.set()

    def wait(self) -> None:
        self._event.wait()
        if not self._wanted:
            raise _NotWanted


class _NotWanted(Exception):
    """The training step's compile was called off (``_Gate.close``)."""


def _timed(fn):
    """``fn()`` and the time.perf_counter() at which it returned."""
    value = fn()
    return value, time.perf_counter()


def _header(molecule: system.Molecule, config: config_lib.Config, template, mesh) -> str:
    """The job in one line: molecule, electrons per spin, parameters, walkers, devices."""
    n_params = sum(x.size for x in jax.tree.leaves(template.params))
    devices = mesh.devices.size
    kind = jax.devices()[0].platform
    return (
        f"{config.system}: {molecule.n_electrons} electrons ({molecule.n_up} up, "
        f"{molecule.n_down} down), {n_params:,} parameters, {config.walkers} walkers on "
        f"{devices} {kind} device{'s' * (devices != 1)}"
        + (f"; ECP {ecp.describe(molecule.symbols, molecule.ecp)}" if molecule.ecp else "")
        + (f"; the lowest {config.states} states" if config.states > 1 else "")
    )


def step_config(config: config_lib.Config) -> StepConfig:
    return StepConfig(
        clip_scale=config.clip_scale,
        chunk_size=config.chunk_size,
        jacobian_blocks=config.jacobian_blocks,
    )
