"""One training step on the default device: compile, step time, memory and its parts.

    python benchmarks/gpu_step.py [--set system=N2 --set walkers=4096 ...] [--steps 10]
                                  [--parts] [--label NAME] [--go FILE]

Builds the training step of ``psijax train`` for the config the ``--set key=value`` pairs
give (JSON values: ``--set 'layers=[[256,32],[256,32],[256,32],[256,32]]'``), with random
parameters and no pretraining (a step's cost does not depend on the parameters' values),
compiled as ``psijax train`` compiles it (``psijax.training.memory.compile_within``: the
walker chunk and jacobian blocks that fit the device's memory). Prints one JSON line:
compile seconds, the first step, the median of ``--steps`` steps, walker-steps per second,
the device's peak memory (``memory_stats``; GPUs only) and XLA's static plan, and with
``--parts`` each part of the step jitted alone (MCMC moves, local energies, the per-walker
jacobian, the SPRING update; medians of three calls), which on an accelerator stands in
for a profile: each part's time is the device's time for it. With ``--go FILE`` it compiles
everything, prints READY and times only once FILE exists (benchmarks/gpu_run.py compiles
several rows at once and times one at a time).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

import jax
import jax.numpy as jnp

import psijax
from psijax import config as config_lib
from psijax import sampling
from psijax.parallel.batching import map_walkers
from psijax.system import sizing

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from step_profile import compile_as_train, profile_steps, random_job, scopes_of

MIB = 2**20


def _timed(fn, *args, repeats: int = 3) -> float:
    jax.block_until_ready(fn(*args))
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        jax.block_until_ready(fn(*args))
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def compile_parts(job, config, chunk: int | None) -> dict:
    """Each part of the step jitted alone and compiled ahead of time, on the job's state."""
    net, state = job.net, job.state
    params, walkers = state.params, state.walkers
    batch = lambda p: lambda w: map_walkers(net.log_abs, p, w, chunk_size=chunk)

    @jax.jit
    def mcmc(key, params, walkers, log_abs, width):
        return sampling.metropolis(key, batch(params), walkers, log_abs, width, config.mcmc_moves)

    energies = jax.jit(lambda p, w: map_walkers(job.local_energy, p, w, chunk_size=chunk))
    flat = lambda p, r: jax.flatten_util.ravel_pytree(jax.grad(net.log_abs)(p, r))[0]
    jacobian = jax.jit(lambda p, w: map_walkers(flat, p, w, chunk_size=chunk))
    update = jax.jit(
        lambda s, p, j, c: job.optimizer.update(p, s, p, jacobian=j, centered_energies=c)
    )
    key = jax.random.PRNGKey(0)
    log_abs_of = jax.jit(lambda p, w: batch(p)(w))
    log_abs = jax.eval_shape(log_abs_of, params, walkers)
    jac = jax.eval_shape(jacobian, params, walkers)
    centered = jax.eval_shape(energies, params, walkers)
    return {
        "mcmc": mcmc.lower(key, params, walkers, log_abs, state.sampler).compile(),
        "log_abs": log_abs_of.lower(params, walkers).compile(),
        "local_energy": energies.lower(params, walkers).compile(),
        "jacobian": jacobian.lower(params, walkers).compile(),
        "optimizer": update.lower(state.opt_state, params, jac, centered).compile(),
    }


def parts(job, compiled: dict) -> dict[str, float]:
    """Median seconds of each part of the step (``compile_parts``) on the job's state."""
    state = job.state
    params, walkers = state.params, state.walkers
    mcmc = compiled["mcmc"]
    energies, jacobian = compiled["local_energy"], compiled["jacobian"]
    jac = jacobian(params, walkers)
    e = energies(params, walkers)
    centered = e - jnp.mean(e)
    log_abs = compiled["log_abs"](params, walkers)
    key = jax.random.PRNGKey(0)
    out = {
        "mcmc": _timed(mcmc, key, params, walkers, log_abs, state.sampler),
        "local_energy": _timed(energies, params, walkers),
        "jacobian": _timed(jacobian, params, walkers),
        "optimizer": _timed(compiled["optimizer"], state.opt_state, params, jac, centered),
    }
    del jac
    return out


def traced_parts(compiled, state, steps: int):
    """Seconds per step of each part (MCMC, local energy, jacobian, optimiser, ...) from a
    jax.profiler trace of ``steps`` steps: the device's kernels by the named scope of their
    HLO instruction; no extra program is compiled (a GPU's, not a CPU's: see
    benchmarks/step_profile.py there). Returns (state, the split or None, what the trace held)."""
    import collections

    parts_of = scopes_of(compiled.as_text())
    # a kernel inside a CUDA graph carries the graph's instruction (command_buffer_N) as its
    # HLO op; its own name is its fusion's, '.' written '_'
    by_kernel = {name.replace(".", "_"): part for name, part in parts_of.items()}
    state, _, profile, _ = profile_steps(compiled, state, steps)
    busy, unmatched, seen = collections.Counter(), collections.Counter(), {}
    for plane in profile.planes:
        if not plane.name.startswith("/device:"):
            continue
        lines = {line.name: line for line in plane.lines}
        seen[plane.name] = sorted(lines)
        # the derived line of XLA's ops where the trace has it, else the streams' kernels,
        # each named by its HLO instruction (the kernel's ``hlo_op``)
        chosen = [lines["XLA Ops"]] if "XLA Ops" in lines else [
            line for name, line in lines.items() if name.startswith("Stream")]  # fmt: skip
        for event in (e for line in chosen for e in line.events):
            name = str(dict(event.stats).get("hlo_op", event.name)).split(":")[0].strip()
            part = parts_of.get(name) or by_kernel.get(event.name.replace(".", "_"))
            if part is None:
                unmatched[f"{name} {event.name[:60]}"] += event.duration_ns
                part = "unmatched"
            busy[part] += event.duration_ns
    split = {k: v / steps / 1e9 for k, v in busy.items()} or None
    about = dict(planes=seen, unmatched=dict(unmatched.most_common(12)))
    return state, split, about


def wait_for(go: str | None) -> float:
    """With ``go``: say READY and wait until the file ``go`` exists (benchmarks/gpu_run.py
    compiles several rows at once and times one at a time); the seconds waited."""
    if go is None:
        return 0.0
    print("READY", flush=True)
    t = time.perf_counter()
    while not os.path.exists(go):
        time.sleep(0.05)
    return time.perf_counter() - t


def measure(
    overrides: dict, steps: int, with_parts: bool, go: str | None = None, trace: int = 0
) -> dict:
    config = config_lib.from_dict(overrides)
    config = sizing.for_system(config)  # walkers by the molecule, as a run
    job = random_job(config)
    state = job.state
    device = jax.devices()[0]
    out = dict(
        overrides, device=device.device_kind, jax=jax.__version__,
        electrons=job.molecule.n_electrons, walkers=config.walkers,
        params=sum(x.size for x in jax.tree.leaves(state.params)),
        laplacian=type(job.local_energy.hamiltonian.laplacian).__name__,
        network=job.net.describe(),
    )  # fmt: skip
    compiled, compiled_as = compile_as_train(job, config)
    out.update(compiled_as)
    if with_parts:
        t = time.perf_counter()
        compiled_parts = compile_parts(job, config, compiled_as["chunk_size"])
        out["parts_compile_s"] = time.perf_counter() - t
    out["waited_s"] = wait_for(go)
    t = time.perf_counter()
    state, metrics = compiled(state)
    jax.block_until_ready(metrics)
    out["first_step_s"] = time.perf_counter() - t
    times, energies = [], []
    for _ in range(steps):
        t = time.perf_counter()
        state, metrics = compiled(state)
        jax.block_until_ready(metrics)
        times.append(time.perf_counter() - t)
        energies.append(float(metrics["energy"]))
    if times:
        out["step_s"] = statistics.median(times)
        out["step_min_s"] = min(times)
        out["walker_steps_per_s"] = config.walkers / out["step_s"]
        out["last_energy"] = energies[-1]
    stats = device.memory_stats() if hasattr(device, "memory_stats") else None
    if stats and "peak_bytes_in_use" in stats:
        out["peak_mib"] = stats["peak_bytes_in_use"] / MIB
        out["limit_mib"] = stats.get("bytes_limit", 0) / MIB
    if trace:  # the step's figures stand whatever the profiler does
        try:
            state, out["traced_parts"], out["trace"] = traced_parts(compiled, state, trace)
        except Exception as error:
            out["trace_error"] = f"{type(error).__name__}: {error}"[:500]
    if with_parts:
        job = job._replace(state=state)
        out["parts"] = parts(job, compiled_parts)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--parts", action="store_true")
    parser.add_argument("--label", default="")
    parser.add_argument("--trace", type=int, default=0, metavar="STEPS",
                        help="the step's parts from a profile of STEPS more steps")  # fmt: skip
    parser.add_argument("--go", default=None, help="compile, say READY, time once FILE exists")
    parser.add_argument(
        "--factor", choices=("device", "loop"), default="device",
        help="SPRING's Cholesky factor: the device's own (psijax's choice off a CPU) or XLA's "
        "loop on every platform (the CPU's), for an A/B",
    )  # fmt: skip
    args = parser.parse_args()
    if args.factor == "loop":
        import importlib

        spring = importlib.import_module("psijax.optim.spring")  # the module, not the function
        spring._factor = spring._cholesky
    overrides = {}
    for item in args.set:
        key, _, value = item.partition("=")
        try:
            overrides[key] = json.loads(value)
        except json.JSONDecodeError:
            overrides[key] = value
    out = measure(overrides, args.steps, args.parts, args.go, args.trace)
    out["label"], out["factor"] = args.label, args.factor
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    psijax.configure()  # the process-wide set-up psijax's own jobs do
    main()
