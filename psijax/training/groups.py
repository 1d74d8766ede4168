"""The training step in walker groups run at once, one host thread each, on one CPU device.

XLA's CPU client runs a program on the thread that calls it, and within a program runs the
operations one after another, most of them too small to split between threads: the
one-program LiH step kept XLA's threads busy for about 1.2 of the two cores' wall time.
Two programs called from two host threads run at the same time. So on one CPU device with
two or more cores the step's per-walker work, the MCMC moves, the local energies and
SPRING's jacobian (``group``), runs as one program per equal group of walkers, each called
from its own thread, and one more program (``combine``) takes all the walkers together:
the energy's statistics and clipping, SPRING's Gram matrix and update, the guard and the
metrics (``psijax.training.step.finish``, as in the one-program step).

It is the same step: each walker draws the random numbers it draws in the one-program
step (its rows of the whole batch's, ``rows`` of ``psijax.sampling.move``), so it moves,
and its local energy and jacobian row are formed, as there; the MCMC's acceptance is the
groups' mean and the adapted width their geometric mean, which for equal groups is the
width the whole batch's acceptance gives (``psijax.sampling.adapt_width`` is exponential
in it). Only a lost walker differs: it restarts from the first healthy walker of its
group, not of the whole batch.
Used where the optimiser needs the per-walker jacobian (SPRING), the sampler is a
``Metropolis`` one and the walkers split into groups of whole chunks; elsewhere, and on
several devices or a GPU, the step is one program (``count``).
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import types
import weakref

import jax
import jax.numpy as jnp

from psijax import optim, parallel, sampling
from psijax.optim import jacobian as jacobian_lib
from psijax.optim.base import CENTERED_ENERGIES, JACOBIAN, PER_WALKER
from psijax.optim.gradient import energy_stats, make_local_energies
from psijax.parallel import cpu_codegen
from psijax.parallel.batching import map_walkers
from psijax.parallel.cpu_lapack import cores as _cores
from psijax.sampling.metropolis import Metropolis
from psijax.training.step import Moved, StepConfig, finish, streams, walker_chunk
from psijax.types import TrainState

GROUPS = 2  # per CPU device with two cores or more


def count(config: StepConfig, mesh, state_template: TrainState, sampler, needs) -> int:
    """How many walker groups the step runs at once: ``config.groups`` where set, else
    ``GROUPS`` on one CPU device with two cores or more, where the step can be split (module
    doc), and 1 (one program) otherwise."""
    n = state_template.walkers.shape[0]
    splittable = (
        needs & PER_WALKER
        and config.jacobian_blocks == 1
        and isinstance(sampler, Metropolis)
        and jnp.ndim(state_template.width) == 0
        and mesh.devices.size == 1
    )
    if config.groups is not None:
        if config.groups > 1 and not splittable:
            raise ValueError(
                f"groups={config.groups} needs one device, SPRING's per-walker jacobian "
                "(jacobian_blocks 1) and a Metropolis sampler; use groups=1"
            )
        if config.groups > 1 and n % config.groups:
            raise ValueError(f"groups={config.groups} does not divide the {n} walkers")
        return config.groups
    cpu = mesh.devices.flat[0].platform == "cpu"
    if not (splittable and cpu and _cores() >= 2 and n % GROUPS == 0):
        return 1
    chunk = _chunk(config, mesh, n, GROUPS)
    return GROUPS if chunk is None or (n // GROUPS) % chunk == 0 else 1


def _chunk(config: StepConfig, mesh, n: int, groups: int) -> int | None:
    """The walker chunk within a group: the one-program step's (``walker_chunk``), or
    None where a group of the automatic size fits in one chunk."""
    chunk = walker_chunk(config, mesh, n)
    if config.chunk_size is None and chunk is not None and chunk >= n // groups:
        return None
    return chunk


@dataclasses.dataclass
class GroupedStep:
    """``step(state) -> (state, metrics)`` like the one-program step's jit, built from the
    groups' program (one for every group, the group an argument) and a combining one;
    ``lower(state).compile()`` compiles both."""

    log_abs: object
    local_energy: object
    optimizer: object
    config: StepConfig
    mesh: object
    state_template: TrainState
    sampler: object
    estimators: tuple

    def __post_init__(self):
        self.needs = optim.needs_of(self.optimizer)
        self.n = self.state_template.walkers.shape[0]
        self.k = count(self.config, self.mesh, self.state_template, self.sampler, self.needs)
        self.random = bool(getattr(self.local_energy, "needs_key", False))
        self._compiled = None

    def _group(self):
        """The groups' program, ``group(params, walkers, width, key, g)``: group ``g``'s
        walkers moved, their local energies and jacobian (one program for every group)."""
        size = self.n // self.k
        chunk = _chunk(self.config, self.mesh, self.n, self.k)
        energies_of = make_local_energies(self.local_energy, chunk_size=chunk)

        def group(params, walkers, width, key, g):
            _, mcmc_key, energy_key = streams(key, self.random)
            rows = (g * size, self.n)  # the whole batch's random numbers for these rows
            mine = jax.lax.dynamic_slice_in_dim(walkers, rows[0], size)
            batch_log_abs = sampling.values_of(
                lambda w: map_walkers(self.log_abs, params, w, chunk_size=chunk)
            )
            with jax.named_scope("mcmc"):
                moved = Moved(
                    *sampling.move(
                        self.sampler,
                        mcmc_key,
                        batch_log_abs,
                        mine,
                        batch_log_abs(mine),
                        width,
                        rows=rows,
                    )
                )
            with jax.named_scope("local_energy"):
                energies, aux = energies_of(params, moved.walkers, energy_key, rows=rows)
            with jax.named_scope("jacobian"):
                jac = jacobian_lib.leaves(
                    self.log_abs, params, moved.walkers, jnp.isfinite(energies),
                    chunk_size=self.config.chunk_size,
                )  # fmt: skip
            return moved, energies, aux, jac

        return group

    def _combine(self, state: TrainState, parts):
        moved = [p[0] for p in parts]
        together = lambda *a: jnp.concatenate(a, axis=0)
        walkers = together(*(m.walkers for m in moved))
        log_abs = together(*(m.log_abs for m in moved))
        width = jnp.exp(jnp.mean(jnp.log(jnp.stack([m.width for m in moved]))))
        moves = jax.tree.map(lambda *a: jnp.mean(jnp.stack(a)), *(m.moves for m in moved))
        n_reset = sum(m.n_reset for m in moved)
        energies = together(*(p[1] for p in parts))
        aux = None if parts[0][2] is None else jax.tree.map(together, *(p[2] for p in parts))
        stats = energy_stats(energies, self.config.clip_scale, aux)
        jac = jax.tree.map(together, *(p[3] for p in parts))
        with jax.named_scope("jacobian"):
            n_finite = jnp.maximum(self.n - stats.n_nonfinite, 1.0)
            grads = jac.rmatvec_like(state.params, (2.0 / n_finite) * stats.centered)
        extra = {JACOBIAN: jac, CENTERED_ENERGIES: stats.centered}
        extra = {k: v for k, v in extra.items() if k in self.needs}
        key = streams(state.key, self.random)[0]
        moved = Moved(walkers, log_abs, width, moves, n_reset)
        return finish(
            self.optimizer, self.needs, self.mesh, self.estimators, state, key, moved,
            stats.energy, stats, grads, extra,
        )  # fmt: skip

    def lower(self, state: TrainState) -> _Lowered:
        options = cpu_codegen.compiler_options()
        args = (state.params, state.walkers, state.width, state.key, jnp.int32(0))
        group = jax.jit(self._group(), compiler_options=options).lower(*args)
        parts = (group.out_info,) * self.k  # the groups' outputs, without tracing again
        shardings = parallel.state_shardings(self.mesh, self.state_template)
        combine = jax.jit(
            self._combine,
            out_shardings=(shardings, parallel.replicated(self.mesh)),
            compiler_options=options,
        ).lower(state, parts)
        return _Lowered(group, combine, self.k)

    def __call__(self, state: TrainState):
        if self._compiled is None:
            self._compiled = self.lower(state).compile()
        return self._compiled(state)


@dataclasses.dataclass
class _Lowered:
    group: object
    combine: object
    k: int

    def compile(self, compiler_options: dict | None = None) -> _Compiled:
        """Both programs compiled, with ``compiler_options`` over the step's own."""
        # the groups' program and the combining one compile at once, one thread each
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            combine = pool.submit(self.combine.compile, compiler_options)
            group = self.group.compile(compiler_options)
            return _Compiled(group, combine.result(), self.k)


class _Compiled:
    """The compiled groups' and combining programs: every group but the first is called
    from a worker thread of its own, the first from the caller's."""

    def __init__(self, group, combine, k: int):
        self.group, self.combine = group, combine
        self._indices = [jnp.int32(g) for g in range(k)]
        self._pool = concurrent.futures.ThreadPoolExecutor(k - 1, thread_name_prefix="psijax-group")
        weakref.finalize(self, self._pool.shutdown, wait=False)  # its threads end with it

    def __call__(self, state: TrainState):
        # Inputs that are still being computed (the last step's) would queue each group's
        # call to run after them, one after the other; ready inputs run a program on the
        # thread that calls it, so the groups run at once.
        args = jax.block_until_ready((state.params, state.walkers, state.width, state.key))
        run = lambda g: jax.block_until_ready(self.group(*args, g))
        others = [self._pool.submit(run, g) for g in self._indices[1:]]
        parts = [run(self._indices[0])] + [f.result() for f in others]
        return self.combine(state, tuple(parts))

    def as_text(self) -> str:
        """The groups' program's HLO, then the combining program's."""
        return self.group.as_text() + "\n" + self.combine.as_text()

    def memory_analysis(self):
        """The groups' plans and the combining program's together (they are alive at once)."""
        plans = [self.group.memory_analysis()] * len(self._indices)
        plans.append(self.combine.memory_analysis())
        total = lambda name: sum(getattr(m, name) for m in plans)
        return types.SimpleNamespace(
            argument_size_in_bytes=plans[-1].argument_size_in_bytes,
            output_size_in_bytes=total("output_size_in_bytes"),
            alias_size_in_bytes=0,
            temp_size_in_bytes=total("temp_size_in_bytes"),
        )
