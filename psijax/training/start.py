"""A run up to its first training step: the step compiled in the background while a fresh
run makes its initial parameters and walkers, pretrains on Hartree-Fock and burns in, each
phase under the step watch (``launch``).

Pretraining moves the walkers by Hartree-Fock's density with steps scaled to each
electron's distance from the nearest nucleus (``pretrain.sampler_of``), whatever the run's
sampler, cores and valence alike; so do burn-in's steps before its last ``ADAPT_STEPS``
(none at the default length), by the network's density. The last ``ADAPT_STEPS`` are the
run's own sampler's, adapting its width.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import threading
import time
from collections.abc import Callable

import jax
import jax.numpy as jnp

from psijax import config as config_lib
from psijax import parallel, registry, sampling
from psijax.parallel import cpu_codegen
from psijax.parallel.batching import map_walkers
from psijax.run.progress import Progress
from psijax.run.watch import StepWatch
from psijax.sampling import burn_in
from psijax.system import ecp, scf
from psijax.training import memory, pretrain, warm
from psijax.training.state import train_state
from psijax.types import TrainState

# Burn-in ends with this many steps of the run's own sampler, adapting its width; the steps
# before move with pretraining's (steps scaled to the nearest nucleus), which bring N2's
# valence electrons to the density where one width set by the cores does not in 100 steps
# (docs/benchmarks.md, "N2's launch").
ADAPT_STEPS = 10
# In those steps the run's sampler adapts its width at this rate (``Metropolis.rate``; 0.1
# in training, at most a factor e over 10 steps): from its initial width to H2's, 4.5x
# wider, training otherwise began at acceptance 0.78 and took 40 steps to reach 0.5.
ADAPT_RATE = 0.5


def adapting(sampler):
    """The run's ``sampler`` as burn-in's last steps use it: adapting at ``ADAPT_RATE``
    where it has a rate (unchanged otherwise; training goes on from the state it leaves)."""
    return dataclasses.replace(sampler, rate=ADAPT_RATE) if hasattr(sampler, "rate") else sampler


def burn_in_split(steps: int, leads: bool) -> tuple[int, int]:
    """``steps`` of burn-in as (steps of pretraining's sampler, then steps of the run's):
    the last ``ADAPT_STEPS`` (or all, when fewer) are the run's, and all of them when the
    run's sampler does not differ (``leads`` False)."""
    lead_steps = max(steps - ADAPT_STEPS, 0) if leads else 0
    return lead_steps, steps - lead_steps


def _pretraining_beat(watch: StepWatch | None):
    """``pretrain``'s chunk heartbeat for ``watch``: the first chunk (which compiles)
    arms it, every later one is a beat."""
    if watch is None:
        return None
    first = True

    def beat(done: int) -> None:
        nonlocal first
        if first or done <= watch.step:  # a new pretraining (the next state's) starts
            watch.arm("pretraining", step=done, unit=f"chunk of {pretrain.CHUNK} steps")
            first = False
        else:
            watch.beat(done)

    return beat


def _from_lead(hf: scf.HartreeFock) -> scf.HartreeFock:
    """Process 0's Hartree-Fock orbitals on every process: each runs pyscf, whose results
    differ in the last bits from process to process, and pretraining's targets must agree
    to the bit where its fit and parameters are replicated."""
    up, down, energy, spectrum = parallel.from_lead(
        (hf.coeff_up, hf.coeff_down, hf.energy, hf.spectrum)
    )
    return dataclasses.replace(
        hf, coeff_up=up, coeff_down=down, energy=float(energy), spectrum=spectrum
    )


def launch(
    build, settings, state: TrainState | None, show: Progress, watch: StepWatch | None, *,
    net, optimizer, sampler, molecule, config, mesh, template,
) -> tuple[Callable, TrainState]:  # fmt: skip
    """The compiled training step ``build(settings)`` (fitted to the memory one device can
    give it: ``psijax.training.memory``) and the state it starts from: ``state`` when
    resuming, else a fresh one (``fresh_state``). The step is traced at once and compiled
    on a thread of its own once pretraining's and burn-in's programs are compiled
    (``_Gate``), while they run."""
    budget = memory.budget()  # a collective with several processes: here, not on the thread
    notes: list[str] = []  # the compiler thread's, shown from this one
    fresh = state is None
    show.note("compiling the training step" + " (in the background)" * fresh)
    t_compile = time.perf_counter()
    gate = _Gate()
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        compiling = pool.submit(_timed, lambda: memory.compile_within(
            build, settings, template, budget, config=config, mesh=mesh,
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
    return step, state


def fresh_state(
    net, optimizer, sampler, molecule, config, mesh, show: Progress,
    watch: StepWatch | None = None, compiled: Callable[[], None] = lambda: None,
) -> TrainState:  # fmt: skip
    """Initial parameters and walkers, Hartree-Fock pretraining and sampler burn-in, each
    phase under ``watch`` (a stalled pretraining step or burn-in ends the run as a stalled
    training step does). ``compiled()`` once burn-in's and pretraining's programs are
    compiled, before they run (``psijax.training.job`` then compiles the training step)."""
    keys = jax.random.split(jax.random.PRNGKey(config.seed), 5)
    params = net.init(keys[0], jnp.float32)
    params = parallel.to_global(params, jax.tree.map(lambda _: parallel.replicated(mesh), params))
    copies = registry.eigenstates(config).n_states  # K copies of the electrons per walker
    walkers = sampling.init_walkers(keys[1], molecule, config.walkers * copies)
    walkers = walkers.reshape(config.walkers, copies * molecule.n_electrons, 3)
    walkers = parallel.to_global(walkers, parallel.walker_sharding(mesh))
    sampler_state, log_abs = sampler.init(jnp.float32), None
    if watch is not None:
        watch.disarm("compiling the burn-in")  # compiling is not a step
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        # burn-in's program compiles on a thread while pretraining's is made and compiled
        burn = None
        if config.burn_in_steps:
            lowered = _burn_in_program(net, sampler, molecule, config, params, keys[3], walkers)
            burn = pool.submit(lowered.compile, cpu_codegen.compiler_options(brief=True))

        def ready() -> None:  # both programs compiled: the training step's may start
            if burn is not None:
                burn.result()
            compiled()

        if config.init_from:  # another run's wavefunction, instead of pretraining
            params, walkers = warm.start(config.init_from, molecule, config, mesh)
            show.note(f"starting from the wavefunction of {config.init_from}")
            ready()
        else:
            params, walkers = _pretrained(
                net, params, molecule, walkers, config, show, watch, keys[2], ready
            )
        if burn is not None:
            lead_steps, own = burn_in_split(config.burn_in_steps, _leads(config))
            scaled = f"{lead_steps} steps scaled to the nearest nucleus, then " * bool(lead_steps)
            show.note(f"burn-in ({scaled}{own} steps of {config.mcmc_moves} MCMC moves)")
            if watch is not None:
                watch.arm("burn-in", counted=False)
            walkers, log_abs, sampler_state = burn.result()(params, keys[3], walkers, sampler_state)
            if watch is not None:
                jax.block_until_ready(walkers)  # it ran within the bound, or the watch spoke
    if watch is not None:
        watch.disarm("compiling the training step")
    return train_state(
        net,
        optimizer,
        params,
        walkers,
        keys[4],
        sampler_state=sampler_state,
        log_abs=log_abs,
        mesh=mesh,
    )


def _pretrained(net, params, molecule, walkers, config, show, watch, key, ready):
    """(params, walkers) after Hartree-Fock pretraining (unchanged without it); ``ready()``
    once, when its program is compiled (at once without pretraining)."""
    if not config.pretrain_steps:
        ready()
        return params, walkers
    t0 = time.perf_counter()
    hf = _from_lead(scf.hartree_fock(molecule, config.basis))
    basis = ecp.pretraining_basis(molecule.symbols, molecule.ecp, config.basis)
    show.note(
        f"Hartree-Fock (UHF/{basis}): E = {hf.energy:.6f} Ha"
        f"{'' if hf.converged else ' (not converged)'} ({time.perf_counter() - t0:.1f} s)"
    )
    limit = config_lib.pretrain_limit(config)
    extends = pretrain.extends(config.pretrain_steps, limit)
    extra = f", more up to {limit} while the orbitals are off by > 0.7%" * extends
    show.phase(f"pretraining on Hartree-Fock ({basis}{extra})", config.pretrain_steps)
    t0 = time.perf_counter()
    if watch is not None:
        watch.disarm("pretraining's first chunk")  # it compiles; later chunks are timed
    settings = dict(
        steps=config.pretrain_steps, max_steps=limit,
        sampler=pretrain.sampler_of(config, molecule),
        callback=lambda i, loss: show.pretrain(i, loss),
        on_chunk=_pretraining_beat(watch),
    )  # fmt: skip
    params, walkers, losses = registry.eigenstates(config).pretrain(
        key, net, params, molecule, walkers, hf=hf, basis=config.basis, ready=ready,
        note=show.note, **settings,
    )  # fmt: skip
    show.note(
        f"pretrained {'/'.join(str(len(x)) for x in losses)} steps, loss "
        f"{'/'.join(f'{x[-1]:.3g}' for x in losses)} ({time.perf_counter() - t0:.1f} s)"
    )
    return params, walkers


def _leads(config) -> bool:
    """Whether burn-in leads with pretraining's sampler (the run's differs)."""
    return config.sampler != pretrain.SAMPLER


def _burn_in_program(net, sampler, molecule, config, params, key, walkers):
    """Burn-in's program, lowered: ``run(params, key, walkers, sampler_state) -> (walkers,
    log|psi|, sampler_state)``, ``config.burn_in_steps`` steps (``burn_in_split``) by the network's
    density with ``params`` (an argument: it compiles before pretraining has set them)."""
    lead = pretrain.sampler_of(config, molecule, n_moves=config.mcmc_moves)
    lead_steps, own = burn_in_split(config.burn_in_steps, _leads(config))

    def run(params, key, walkers, sampler_state):
        batch_log_abs = lambda w: map_walkers(net.log_abs, params, w)
        return burn_in(
            key, adapting(sampler), batch_log_abs, walkers, sampler_state, n_steps=own, lead=lead,
            lead_steps=lead_steps,
        )  # fmt: skip

    return jax.jit(run).lower(params, key, walkers, sampler.init(jnp.float32))


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
