"""How the training step runs: one jitted program, or walker groups on threads.

The step is defined once (``psijax.training.step.StepWork``): the walkers' work, then the
step's finish over all walkers. ``one_program`` runs both in one jitted program, the state
donated. ``ThreadGroups`` runs the walkers' work as one program per equal group of walkers,
each called from its own host thread, then the finish as one more program.

Why groups: XLA's CPU client runs a program on the thread that calls it, and within a
program runs the operations one after another, most of them too small to split between
threads: the one-program LiH step kept XLA's threads busy for about 1.2 of the two cores'
wall time. Two programs called from two host threads run at the same time. It is the same
step: each walker draws the random numbers it draws in one program (its rows of the whole
batch's: ``rows`` of ``psijax.sampling.move``), so it moves, and its local energy and
jacobian row are formed, as there; the sampler merges the groups' states
(``Sampler.merge``; Metropolis: the geometric mean of the adapted widths, which for equal
groups is the width the whole batch's acceptance gives). Only a lost walker differs: it
restarts from the first healthy walker of its group, not of the whole batch. The host
waits for the groups' programs each step (a program queued behind inputs still being
computed would not start on its own thread); the finish is dispatched without waiting.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import types
import weakref
from typing import TYPE_CHECKING

import jax
import jax.numpy as jnp

from psijax import parallel
from psijax.parallel import cpu_codegen
from psijax.types import TrainState

if TYPE_CHECKING:
    from psijax.training.step import StepWork


def one_program(work: StepWork, state_template: TrainState):
    """The step as one jitted program, sharded like ``state_template``, its state donated."""

    def step(state: TrainState):
        part = work.walkers(state.params, state.walkers, state.sampler, state.key)
        return work.finish(state, (part,))

    shardings = parallel.state_shardings(work.mesh, state_template)
    return jax.jit(
        step,
        in_shardings=(shardings,),
        out_shardings=(shardings, parallel.replicated(work.mesh)),
        donate_argnums=0,
        compiler_options=cpu_codegen.compiler_options(),
    )


@dataclasses.dataclass
class ThreadGroups:
    """``step(state) -> (state, metrics)`` like ``one_program``'s jit, in ``k`` walker
    groups: the groups' program (one for every group, the group an argument) and the
    finish; ``lower(state).compile()`` compiles both."""

    work: StepWork
    k: int
    state_template: TrainState

    def __post_init__(self):
        self._compiled = None

    def _group(self):
        """``group(params, walkers, sampler_state, key, g)``: group ``g``'s share of the
        walkers' work."""
        n = self.state_template.walkers.shape[0]
        size = n // self.k

        def group(params, walkers, sampler_state, key, g):
            mine = jax.lax.dynamic_slice_in_dim(walkers, g * size, size)
            return self.work.walkers(params, mine, sampler_state, key, rows=(g * size, n))

        return group

    def lower(self, state: TrainState) -> _Lowered:
        options = cpu_codegen.compiler_options()
        args = (state.params, state.walkers, state.sampler, state.key, jnp.int32(0))
        group = jax.jit(self._group(), compiler_options=options).lower(*args)
        parts = (group.out_info,) * self.k  # the groups' outputs, without tracing again
        shardings = parallel.state_shardings(self.work.mesh, self.state_template)
        finish = jax.jit(
            self.work.finish,
            out_shardings=(shardings, parallel.replicated(self.work.mesh)),
            donate_argnums=0,
            compiler_options=options,
        ).lower(state, parts)
        return _Lowered(group, finish, self.k)

    def __call__(self, state: TrainState):
        if self._compiled is None:
            self._compiled = self.lower(state).compile()
        return self._compiled(state)


@dataclasses.dataclass
class _Lowered:
    group: object
    finish: object
    k: int

    def compile(self, compiler_options: dict | None = None) -> _Compiled:
        """Both programs compiled, with ``compiler_options`` over the step's own."""
        # the groups' program and the finish compile at once, one thread each
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            finish = pool.submit(self.finish.compile, compiler_options)
            group = self.group.compile(compiler_options)
            return _Compiled(group, finish.result(), self.k)


class _Compiled:
    """The compiled groups' and finishing programs: every group but the first is called
    from a worker thread of its own, the first from the caller's."""

    def __init__(self, group, finish, k: int):
        self.group, self.finish = group, finish
        self._indices = [jnp.int32(g) for g in range(k)]
        self._pool = concurrent.futures.ThreadPoolExecutor(k - 1, thread_name_prefix="psijax-group")
        weakref.finalize(self, self._pool.shutdown, wait=False)  # its threads end with it

    def __call__(self, state: TrainState):
        # Inputs that are still being computed (the last step's) would queue each group's
        # call to run after them, one after the other; ready inputs run a program on the
        # thread that calls it, so the groups run at once.
        args = jax.block_until_ready((state.params, state.walkers, state.sampler, state.key))
        run = lambda g: jax.block_until_ready(self.group(*args, g))
        others = [self._pool.submit(run, g) for g in self._indices[1:]]
        parts = [run(self._indices[0])] + [f.result() for f in others]
        return self.finish(state, tuple(parts))

    def as_text(self) -> str:
        """The groups' program's HLO, then the finishing program's."""
        return self.group.as_text() + "\n" + self.finish.as_text()

    def memory_analysis(self):
        """The groups' plans and the finish's together (they are alive at once)."""
        plans = [self.group.memory_analysis()] * len(self._indices)
        plans.append(self.finish.memory_analysis())
        total = lambda name: sum(getattr(m, name) for m in plans)
        return types.SimpleNamespace(
            argument_size_in_bytes=plans[-1].argument_size_in_bytes,
            output_size_in_bytes=total("output_size_in_bytes"),
            alias_size_in_bytes=0,
            temp_size_in_bytes=total("temp_size_in_bytes"),
        )
