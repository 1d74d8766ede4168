"""The whole job in one call: molecule -> trained wavefunction -> energy with an error bar.

>>> import psijax
>>> result = psijax.train(system="H2", steps=500, out="runs/h2")
>>> print(result.energy, result.exact)
>>> psijax.train(out="runs/h2", resume=True, steps=1000)  # continue it to 1000 steps

Every input is checked before anything is written: a bad molecule, config, device count,
basis or checkpoint raises ``InputError`` and leaves the run directory as it was.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable
from pathlib import Path

import jax
import numpy as np

from psijax import config as config_lib
from psijax import hamiltonian, parallel, registry, system
from psijax.ansatz import Ansatz
from psijax.errors import InputError
from psijax.run.compile_cache import use_compilation_cache
from psijax.run.context import RunFiles, running
from psijax.run.progress import Progress
from psijax.rundir import checkpoint, train_files
from psijax.runtime import configure
from psijax.statistics import Estimate, StopRule, tail_estimate
from psijax.system import ecp, sizing
from psijax.training import warm
from psijax.training.start import launch
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
    string in bohr with its charge and spin (a ``Crystal`` its lattice too), an
    ``ElectronGas`` ``heg`` with its electrons, rs and spin, so that the config stays plain
    text."""
    given = overrides.get("system")
    if given is None or isinstance(given, str | os.PathLike):
        return overrides
    if isinstance(given, system.ElectronGas):  # its name, electrons, density and spin
        return overrides | dict(
            system="heg", electrons=given.n_electrons, rs=given.rs, spin=given.spin
        )
    mol = system.resolve(
        given, charge=overrides.get("charge"), spin=overrides.get("spin"), ecp=overrides.get("ecp")
    )
    text = dict(system=mol.atom_string(), charge=mol.charge, spin=mol.spin, unit="bohr")
    if mol.lattice is not None:  # a crystal: its cell in bohr too
        text["lattice"] = mol.lattice_string()
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
    configure()
    job = _resolve(make_config(config, resume=resume, **overrides), resume, force)
    parts = _build(job)
    show = Progress(
        job.config.steps, enabled=progress and job.lead, exact=parts.exact,
        eval_fraction=job.config.eval_fraction, label=parts.eigenstates.progress_label,
        leading=parts.eigenstates.progress_columns(),
    )  # fmt: skip
    show.note(_header(job, parts))
    show.note(parts.net.describe())
    state = _restored(job, parts, show)
    start = 0 if state is None else int(parallel.to_host(state.step))
    config, out = job.config, job.out
    files = RunFiles(out, f"training run in {str(out)!r}", f"psijax train --resume {out}",
                     config.keep_checkpoints, config.stall_timeout)  # fmt: skip
    make_writer = lambda: train_files.RunWriter(
        out, job.molecule, config, parts.eigenstates, resume_step=start, resuming=resume,
        enabled=job.lead,
    )  # fmt: skip
    # every input is checked; from here on files are written
    with running(files, start, make_writer, show, lead=job.lead) as run:
        show.follow(run.writer.energies)  # the running estimate includes a resumed run's rows
        step, state = launch(
            _step_builder(job, parts), step_config(config), state, show, run.watch,
            net=parts.net, optimizer=parts.optimizer, sampler=parts.sampler,
            molecule=job.molecule, config=config, mesh=job.mesh, template=parts.template,
        )  # fmt: skip
        loop = run.loop(
            step, config.steps, _recorder(job, parts, run.writer, show, on_step, started),
            identity=parts.identity, every_steps=config.checkpoint_every,
            every_minutes=config.checkpoint_minutes, max_rejected=config.max_rejected,
            converged=_stop_rule(config, run.writer.energies),
        )  # fmt: skip
        show.phase("training", config.steps, start=start)
        if config.target_error is not None:
            show.note(f"stopping early once the energy's error bar is below "
                      f"{config.target_error:g} Ha and it no longer drifts "
                      "(psijax.statistics.stopping)")  # fmt: skip
        state = loop.run(state, start)
        return _summarise(job, parts, run.writer, loop, state, show, started)


@dataclasses.dataclass(frozen=True)
class _Job:
    """A training run's checked inputs (nothing is written yet)."""

    config: config_lib.Config
    molecule: system.Molecule
    mesh: object
    out: Path
    resume: bool
    lead: bool  # process 0: it writes and reports


@dataclasses.dataclass(frozen=True)
class _Parts:
    """What the run is made of: the wavefunction, its local energy, the optimiser, the
    sampler, the state's layout, its checkpoints' identity and its metrics."""

    eigenstates: object  # what the run solves for (psijax.eigenstates)
    net: Ansatz
    local_energy: object
    optimizer: object
    sampler: object
    template: object
    identity: dict
    estimators: tuple
    exact: float | None  # the exact energy the progress line and result compare with


def _resolve(config: config_lib.Config, resume: bool, force: bool) -> _Job:
    """The molecule and devices of ``config``, every input checked before a file is written."""
    use_compilation_cache(config.compilation_cache)
    molecule = system.for_config(config)
    config = sizing.sized(config, molecule)  # what it leaves to the molecule (walkers)
    mesh = parallel.make_mesh(config.devices)
    parallel.check_walkers(config.walkers, mesh)
    if config.pretrain_steps:
        molecule.to_pyscf(config.basis)  # an unknown basis fails now, before any file is written
    registry.eigenstates(config).check(molecule, config)
    if config.init_from:  # a run whose network fits, before any file is written
        warm.check(config.init_from, molecule, config)
    out = Path(config.out)
    if not resume:
        parallel.check_on_lead(lambda: train_files.check_new(out, force))
    return _Job(config, molecule, mesh, out, resume, jax.process_index() == 0)


def _build(job: _Job) -> _Parts:
    config, molecule = job.config, job.molecule
    eigenstates = registry.eigenstates(config)
    net = registry.ansatz(molecule, config)
    optimizer = registry.optimizer(config)
    sampler = registry.sampler(config, molecule)
    return _Parts(
        eigenstates=eigenstates,
        net=net,
        local_energy=eigenstates.local_energy(hamiltonian.for_config(molecule, config), net),
        optimizer=optimizer,
        sampler=sampler,
        template=abstract_train_state(
            net, optimizer, config.walkers, net.n_electrons, job.mesh, sampler=sampler
        ),
        identity=checkpoint.identity_of(molecule.fingerprint(), config_lib.identity(config)),
        estimators=eigenstates.estimators(),
        exact=eigenstates.exact(molecule),
    )


def _restored(job: _Job, parts: _Parts, show: Progress):
    """The newest checkpoint's state when resuming a run that has one, else None."""
    if not job.resume:
        return None
    state = None
    if (job.out / checkpoint.SUBDIR).is_dir():
        reader = checkpoint.Checkpoints(job.out, read_only=True)
        if reader.latest() is not None:
            t0 = time.perf_counter()
            state = reader.restore(parts.template, parts.identity)
            show.note(f"restored step {reader.latest()} from {job.out / checkpoint.SUBDIR} "
                      f"({time.perf_counter() - t0:.1f} s)")  # fmt: skip
        reader.close()
    if state is None:
        show.note(f"no checkpoint in {job.out} yet: starting the run from step 0")
    return state


def _step_builder(job: _Job, parts: _Parts):
    """``build(settings)``: the training step with ``settings`` (``StepConfig``)."""
    phase = parts.net.phase if getattr(parts.net, "is_complex", False) else None
    return lambda settings: make_step(
        parts.net.log_abs, parts.local_energy, parts.optimizer, settings, job.mesh,
        parts.template, parts.sampler, parts.estimators, phase=phase,
    )  # fmt: skip


def _recorder(job: _Job, parts: _Parts, writer, show, on_step: OnStep | None, started: float):
    """What the run does with each step's metrics: a row, the progress line, ``on_step``."""

    def on_metrics(i: int, m: dict[str, float]) -> None:
        m = parts.eigenstates.with_states(m)  # each state's energy, for several
        writer.row(i, m, time.perf_counter() - started)
        show.step(i, m)
        if on_step is not None and job.lead:
            on_step(i, m)

    return on_metrics


def _summarise(job: _Job, parts: _Parts, writer, loop, state, show, started) -> TrainResult:
    """The energy of the run's trailing steps, summary.json and energy.png, the result."""
    config = job.config
    if loop.converged_at is not None:
        show.note(f"converged at step {loop.converged_at}: {loop.converged_reason}")
    energies = np.asarray(writer.energies)
    finite = energies[np.isfinite(energies)]
    if finite.size < 2:
        raise InputError("fewer than two finite energies; run more steps")
    estimate = tail_estimate(finite, config.eval_fraction)
    per_state = parts.eigenstates.tail(writer.rows, config.eval_fraction)
    if per_state is not None:
        show.note("states: " + "  ".join(f"E{i} = {e} Ha" for i, e in enumerate(per_state)))
    seconds = time.perf_counter() - started
    writer.finish(
        estimate, energies, seconds, config, converged_at=loop.converged_at, states=per_state
    )
    return TrainResult(
        job.molecule, estimate, parts.exact, energies, state.params, seconds, job.out,
        config=config, network=parts.net, converged_at=loop.converged_at, states=per_state,
    )  # fmt: skip


WARM_MIN_WINDOW = 100  # steps: the stop rule's smallest window in a warm-started run


def _stop_rule(config: config_lib.Config, energies: list[float]):
    """The --target-error check on the run's per-step energies (None without a target). A
    warm-started run begins near its optimum, without pretraining's transient: its window
    may be as short as ``WARM_MIN_WINDOW`` steps."""
    if config.target_error is None:
        return None
    window = WARM_MIN_WINDOW if config.init_from else StopRule.min_window
    rule = StopRule(config.target_error, config.eval_fraction, min_window=window)

    def converged() -> str | None:
        verdict = rule.check(energies)
        return verdict.reason if verdict.stop else None

    return converged


def _header(job: _Job, parts: _Parts) -> str:
    """The job in one line: molecule, electrons per spin, parameters, walkers, devices."""
    molecule, config, template, mesh = job.molecule, job.config, parts.template, job.mesh
    n_params = sum(x.size for x in jax.tree.leaves(template.params))
    devices = mesh.devices.size
    kind = jax.devices()[0].platform
    return (
        f"{config.system}: {molecule.n_electrons} electrons ({molecule.n_up} up, "
        f"{molecule.n_down} down), {n_params:,} parameters, {config.walkers} walkers on "
        f"{devices} {kind} device{'s' * (devices != 1)}"
        + (f"; ECP {ecp.describe(molecule.symbols, molecule.ecp)}" if molecule.ecp else "")
        + parts.eigenstates.header
    )


def step_config(config: config_lib.Config) -> StepConfig:
    """The step's settings; a config that no job sized clips as an all-electron run does
    (None would mean no clipping to the step)."""
    clip = sizing.CLIP_SCALE if config.clip_scale is None else config.clip_scale
    return StepConfig(
        clip_scale=clip,
        chunk_size=config.chunk_size,
        jacobian_blocks=config.jacobian_blocks,
    )
