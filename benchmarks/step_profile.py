"""Where the training step's time goes: a jax.profiler trace broken down by part.

    python benchmarks/step_profile.py [--system LiH] [--steps 20] [--trace DIR]

Builds the default job (no pretraining: the cost of a step does not depend on the
parameters' values), compiles the step, traces ``--steps`` steps with jax.profiler and
reads the trace back (``jax.profiler.ProfileData``). Every XLA operation the CPU runs is
an event on one of XLA's threads; the compiled step's HLO names the ``jax.named_scope``
each operation came from (psijax/training/step.py marks mcmc, local_energy, jacobian,
optimizer, metrics). The table gives, per part, the busy time of all threads per step,
its share, and the operations that cost most; then the step's wall time and how busy the
threads were, so that the parts account for the whole step.
"""

from __future__ import annotations

import argparse
import collections
import glob
import os
import platform
import re
import statistics
import tempfile
import time
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax.profiler import ProfileData

import psijax
from psijax import config as config_lib
from psijax import hamiltonian, parallel, registry, sampling, system
from psijax.parallel import cpu_blas
from psijax.system import sizing
from psijax.training.state import train_state
from psijax.training.step import StepConfig, make_step

PARTS = ("mcmc", "local_energy", "jacobian", "optimizer", "metrics")
WAITING = "ThunkExecutor::Execute (wait for completion)"  # a thread blocked, not working
RUNTIME = {"ThunkExecutor::Execute": "runtime (thunk executor)"}
_INSTRUCTION = re.compile(r"^\s*(?:ROOT )?%?([\w.\-]+) = .*?op_name=\"([^\"]*)\"")


def scopes_of(hlo_text: str) -> dict[str, str]:
    """HLO instruction name -> the psijax part it belongs to (by its op_name metadata)."""
    out = {}
    for line in hlo_text.splitlines():
        m = _INSTRUCTION.match(line)
        if m:
            name, op_name = m.groups()
            part = next(
                (p for p in PARTS if f"/{p}/" in op_name or op_name.endswith(f"/{p}")), None
            )
            out[name] = part or "other"
    return out


def self_times(events) -> list[tuple[str, int]]:
    """(name, exclusive ns) of one thread's events: nested events (a while loop's body, an
    executor around its thunks) count once, in the innermost event."""
    spans = sorted(
        ((e.start_ns, e.start_ns + e.duration_ns, e.name) for e in events
         if not e.name.startswith(("ThreadpoolListener", "end: "))),
        key=lambda s: (s[0], -s[1]),
    )  # fmt: skip
    out: list[list] = []
    stack: list[int] = []  # indices into out of the open enclosing events
    for start, end, name in spans:
        while stack and out[stack[-1]][2] <= start:
            stack.pop()
        if stack:
            out[stack[-1]][1] -= min(end, out[stack[-1]][2]) - start
        out.append([name, end - start, end])
        stack.append(len(out) - 1)
    return [(name, max(ns, 0)) for name, ns, _ in out]


class Job(NamedTuple):
    molecule: object
    mesh: object
    net: object
    local_energy: object
    optimizer: object
    sampler: object
    state: object  # the TrainState, random parameters, walkers as initialised


def random_job(config) -> Job:
    """The default job's pieces for ``config`` on one device, with random parameters and
    no pretraining (a step's cost does not depend on the parameters' values)."""
    molecule = system.for_config(config)
    mesh = parallel.make_mesh(1)
    net = registry.ansatz(molecule, config)
    keys = jax.random.split(jax.random.PRNGKey(0), 3)
    params = net.init(keys[0], jnp.float32)
    walkers = jax.device_put(
        sampling.init_walkers(keys[1], molecule, config.walkers), parallel.walker_sharding(mesh)
    )
    local_energy = hamiltonian.for_config(molecule, config).local_energy(net)
    optimizer = registry.optimizer(config)
    state = train_state(net, optimizer, params, walkers, keys[2], mesh=mesh)
    sampler = registry.sampler(config, molecule)
    return Job(molecule, mesh, net, local_energy, optimizer, sampler, state)


def compile_as_train(job: Job, config) -> tuple:
    """The job's training step compiled as ``psijax train`` compiles it
    (``psijax.training.memory.compile_within``: the walker chunk and jacobian blocks that fit
    the device), and what that gave: compile seconds, the chunk, the blocks and XLA's static
    plan in MiB (arguments + outputs + temporaries - aliased)."""
    import sys

    from psijax.training import memory
    from psijax.training.job import step_config

    build = lambda settings: make_step(
        job.net.log_abs, job.local_energy, job.optimizer, settings, job.mesh, job.state,
        job.sampler,
    )  # fmt: skip
    t = time.perf_counter()
    compiled, settings = memory.compile_within(
        build, step_config(config), job.state, memory.budget(), config=config, mesh=job.mesh,
        optimizer=job.optimizer, note=lambda line: print(line, file=sys.stderr),
    )  # fmt: skip
    seconds = time.perf_counter() - t
    mem = compiled.memory_analysis()
    plan = (mem.argument_size_in_bytes + mem.output_size_in_bytes + mem.temp_size_in_bytes
            - mem.alias_size_in_bytes) / 2**20  # fmt: skip
    return compiled, dict(compile_s=seconds, chunk_size=settings.chunk_size,
                          jacobian_blocks=settings.jacobian_blocks, plan_mib=plan)  # fmt: skip


class Trace(NamedTuple):
    walls: list[float]  # wall seconds per traced step
    busy: collections.Counter  # part -> ns over all threads
    by_op: dict  # part -> Counter(operation -> ns)
    threads: collections.Counter  # thread -> ns busy
    waiting: collections.Counter  # thread -> ns blocked waiting for other threads
    unmatched: collections.Counter  # operation without a part -> ns
    path: str  # the trace file


def profile_steps(compiled, state, steps: int, trace_dir: str | None = None):
    """``steps`` steps of ``compiled`` under jax.profiler: (state after them, each step's
    wall seconds, the trace's ``ProfileData``, its file)."""
    trace_dir = trace_dir or tempfile.mkdtemp(prefix="psijax-profile-")
    walls = []
    jax.profiler.start_trace(trace_dir)
    for _ in range(steps):
        t = time.perf_counter()
        state, metrics = compiled(state)
        jax.block_until_ready(metrics)
        walls.append(time.perf_counter() - t)
    jax.profiler.stop_trace()
    path = sorted(glob.glob(f"{trace_dir}/**/*.xplane.pb", recursive=True))[-1]
    return state, walls, ProfileData.from_file(path), path


def trace_parts(compiled, state, steps: int, trace_dir: str | None = None):
    """Run ``steps`` steps of ``compiled`` under jax.profiler and split XLA's work by part.

    Returns the state after the steps and the ``Trace``.
    """
    parts_of = scopes_of(compiled.as_text())
    state, walls, profile, path = profile_steps(compiled, state, steps, trace_dir)

    busy = collections.Counter()  # part -> ns over all threads
    by_op = collections.defaultdict(collections.Counter)  # part -> op -> ns
    threads = collections.Counter()  # thread -> ns busy
    unmatched = collections.Counter()
    waiting = collections.Counter()  # thread -> ns blocked waiting for other threads
    cpu = profile.find_plane_with_name("/host:CPU")
    for line in cpu.lines:
        if not line.name.startswith("tf_XLA"):
            continue
        for name, ns in self_times(line.events):
            if name.startswith(WAITING):
                waiting[line.name] += ns
                continue
            part = parts_of.get(name) or RUNTIME.get(name)
            if part is None:
                unmatched[name] += ns
                part = "other"
            busy[part] += ns
            by_op[part][name] += ns
            threads[line.name] += ns
    return state, Trace(walls, busy, by_op, threads, waiting, unmatched, path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--system", default="LiH")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--trace", default=None, help="keep the trace here (TensorBoard/xprof)")
    args = parser.parse_args()

    config = config_lib.from_dict(dict(system=args.system))
    config = sizing.for_system(config)  # walkers by the molecule, as a run
    job = random_job(config)
    molecule, net, local_energy = job.molecule, job.net, job.local_energy
    state = job.state
    step_config = StepConfig(config.clip_scale, config.chunk_size)
    step = make_step(
        net.log_abs, local_energy, job.optimizer, step_config, job.mesh, state, job.sampler
    )
    compiled = step.lower(state).compile()
    for _ in range(3):  # warm up
        state, metrics = compiled(state)
    jax.block_until_ready(metrics)

    load = os.getloadavg()[0]
    state, trace = trace_parts(compiled, state, args.steps, args.trace)
    walls, busy, by_op, threads, waiting, unmatched, path = trace
    n = args.steps
    wall = statistics.median(walls)
    total = sum(busy.values())
    print(
        f"# {args.system}: {molecule.n_electrons} electrons, {config.walkers} walkers, "
        f"{net.describe()}, {config.optimizer}, "
        f"Laplacian {type(local_energy.hamiltonian.laplacian).__name__}; jax "
        f"{jax.__version__}, python {platform.python_version()}, {os.cpu_count()} CPUs; "
        f"load {load:.2f}; {n} traced steps; LAPACK's BLAS threads "
        f"{','.join(map(str, cpu_blas.lapack_threads())) or '?'}"
    )
    print("| part | busy ms per step (all threads) | share | costliest operations (ms/step) |")
    print("|---|---|---|---|")
    for part in (*PARTS, *RUNTIME.values(), "other"):
        if not busy[part]:
            continue
        top = ", ".join(f"{k} {v / n / 1e6:.1f}" for k, v in by_op[part].most_common(3))
        print(f"| {part} | {busy[part] / n / 1e6:.1f} | {busy[part] / total:.0%} | {top} |")
    print(f"| **all XLA work** | **{total / n / 1e6:.1f}** | 100% | |")
    print()
    print(f"step wall time (median of {n}, traced): {1000 * wall:.1f} ms; sum of step wall "
          f"times {1000 * sum(walls) / n:.1f} ms/step")  # fmt: skip
    for name, ns in threads.most_common():
        print(f"  thread {name}: busy {ns / n / 1e6:.1f} ms/step "
              f"({ns / sum(walls) / 1e9:.0%} of the wall time), waiting for others "
              f"{waiting[name] / n / 1e6:.1f} ms/step")  # fmt: skip
    if unmatched:
        top = ", ".join(f"{k} {v / n / 1e6:.1f}" for k, v in unmatched.most_common(4))
        print(f"  operations without a scope in the step's HLO ('other'): {top}")
    print(f"trace: {path}")


if __name__ == "__main__":
    psijax.configure()  # the process-wide set-up psijax's own jobs do
    main()
