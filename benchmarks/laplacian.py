"""Benchmark the Laplacian operators on a FermiNet-sized network.

For every size and every (operator, batching) pair this measures, on the default
JAX backend with default XLA options:

* value: jit of ``map_walkers(kinetic_energy)`` over the batch of walkers;
* grad:  jit of the gradient w.r.t. the parameters of the batch-mean kinetic energy;
* compile: seconds to trace, lower and compile each (``jit(...).lower().compile()``);
* peak memory: temp + argument + output bytes from the compiled executable's
  ``memory_analysis()`` (XLA's static buffer assignment, not host RSS);
* max rel diff: ``max_i |ke_i - ke_loop_i| / max(|ke_loop_i|, 1 Ha)`` against the
  Loop operator run on the same walkers and parameters.

Times are medians over ``--repeats`` calls after one warm-up call. Rows are printed
as they are measured. Run ``python benchmarks/laplacian.py --quick`` as a smoke test.
"""

from __future__ import annotations

import argparse
import datetime
import functools
import os
import platform
import statistics
import sys
import time
import traceback

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree

from psijax.ansatz.ferminet import FermiNet
from psijax.batching import map_walkers
from psijax.hamiltonian import kinetic_energy
from psijax.laplacian import Forward, ForwardSparse, Hessian, Loop

MIB = 2**20
KE_FLOOR = 1.0  # Hartree: denominator floor of the relative difference


class Skipped(Exception):
    """A measurement not run on purpose (memory guard); the row says why."""


def methods(n_electrons: int, hessian_max: int) -> list[tuple[str, object, str, int | None]]:
    """(name, operator, batching label, chunk_size); Loop first, it is the reference."""
    rows = [
        ("Loop", Loop(), "vmap", None),
        ("Forward", Forward(), "vmap", None),
        ("ForwardSparse(0.6)", ForwardSparse(0.6), "vmap", None),
        ("Forward", Forward(), "chunked(64)", 64),
    ]
    if n_electrons <= hessian_max:
        rows.append(("Hessian", Hessian(), "vmap", None))
    return rows


# --------------------------------------------------------------------- header
def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def mem_available_mib() -> float | None:
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


def load() -> str:
    try:
        return "{:.2f} {:.2f} {:.2f}".format(*os.getloadavg())
    except OSError:
        return "n/a"


def version(module: str) -> str:
    try:
        from importlib.metadata import version as v

        return v(module)
    except Exception:  # noqa: BLE001
        return "n/a"


def print_header(args: argparse.Namespace) -> None:
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = os.cpu_count()
    mem = mem_available_mib()
    print(
        f"# Laplacian operator benchmark, {datetime.datetime.now().isoformat(timespec='seconds')}"
    )
    print(f"- command: {' '.join(['python', *sys.argv])}")
    print(
        f"- python {platform.python_version()}, jax {jax.__version__}, "
        f"jaxlib {version('jaxlib')}, folx {version('folx')}, numpy {np.__version__}"
    )
    print(f"- backend {jax.default_backend()}, devices {jax.devices()}")
    print(f"- CPU: {cpu_model()}; {os.cpu_count()} logical cores, {usable} usable")
    print(
        f"- memory available at start: {mem / 1024:.1f} GiB"
        if mem is not None
        else "- memory available: n/a"
    )
    print(f"- load average (1/5/15 min) at start: {load()}")
    print(f"- XLA_FLAGS: {os.environ.get('XLA_FLAGS', '(unset)')!r}")
    print(
        f"- network: FermiNet layers {args.layers}, {args.determinants} determinants, "
        f"full_det, {args.dtype}; {args.walkers} walkers; one nucleus at the origin"
    )
    print(
        f"- timing: median of {args.repeats} calls after 1 warm-up; a call over "
        f"{args.max_seconds:g} s stops further calls (marked †, n = calls timed); "
        f"skip when compiled peak > {args.max_mib:.0f} MiB"
    )
    print()
    print(
        "| n_electrons | method | batching | value ms | value ratio vs loop | grad ms "
        "| grad ratio vs loop | compile s (value/grad) | peak MiB (value/grad) "
        "| max rel diff vs loop |"
    )
    print("|---:|---|---|---:|---:|---:|---:|---:|---:|---:|")
    sys.stdout.flush()


# ------------------------------------------------------------------ measuring
def compile_fn(fn, *args):
    """(executable, seconds to trace + lower + compile, peak MiB or None)."""
    start = time.perf_counter()
    compiled = jax.jit(fn).lower(*args).compile()
    seconds = time.perf_counter() - start
    peak = None
    try:
        stats = compiled.memory_analysis()
        if stats is not None:
            peak = (
                stats.temp_size_in_bytes + stats.argument_size_in_bytes + stats.output_size_in_bytes
            ) / MIB
    except Exception:  # noqa: BLE001 - not every backend implements it
        peak = None
    return compiled, seconds, peak


def time_calls(compiled, args, repeats: int, max_seconds: float):
    """(median ms, calls timed, guard hit, last output)."""

    def call():
        start = time.perf_counter()
        out = jax.block_until_ready(compiled(*args))
        return time.perf_counter() - start, out

    warm, out = call()
    if warm > max_seconds:  # the warm-up is the only measurement
        return warm * 1e3, 1, True, out
    times = []
    for _ in range(repeats):
        seconds, out = call()
        times.append(seconds)
        if seconds > max_seconds:
            return statistics.median(times) * 1e3, len(times), True, out
    return statistics.median(times) * 1e3, len(times), False, out


def fmt_ms(ms: float, n: int, guarded: bool, repeats: int) -> str:
    text = f"{ms:.1f}" if ms < 1e4 else f"{ms:.0f}"
    if guarded or n != repeats:
        text += f" † (n={n})"
    return text


def fmt_mib(peak: float | None) -> str:
    return "n/a" if peak is None else f"{peak:.0f}"


def run_size(n: int, args: argparse.Namespace, notes: list[str]) -> None:
    n_up, n_down = (n + 1) // 2, n // 2
    net = FermiNet(
        n_up,
        n_down,
        nuclei=((0.0, 0.0, 0.0),),
        layers=args.layers,
        n_determinants=args.determinants,
        full_det=True,
    )
    dtype = jnp.dtype(args.dtype)
    key_params, key_walkers = jax.random.split(jax.random.PRNGKey(args.seed))
    params = net.init(key_params, dtype)
    walkers = jax.random.normal(key_walkers, (args.walkers, n, 3), dtype)
    notes.append(f"n={n}: load average at start {load()}")

    ref_ke = ref_grad = None
    ref_value_ms = ref_grad_ms = None

    for name, op, batching, chunk in methods(n, args.hessian_max):
        if args.methods and name.lower() not in args.methods:
            continue
        ke_one = functools.partial(kinetic_energy, op, net.log_abs)

        def value_fn(p, w, ke_one=ke_one, chunk=chunk):
            return map_walkers(ke_one, p, w, chunk_size=chunk)

        def grad_fn(p, w, value_fn=value_fn):
            return jax.grad(lambda q: jnp.mean(value_fn(q, w)))(p)

        cells = [str(n), name, batching]
        try:
            v_exe, v_compile, v_peak = compile_fn(value_fn, params, walkers)
            g_exe, g_compile, g_peak = compile_fn(grad_fn, params, walkers)
            compile_cell = f"{v_compile:.1f} / {g_compile:.1f}"
            peak_cell = f"{fmt_mib(v_peak)} / {fmt_mib(g_peak)}"
            worst = max(p for p in (v_peak, g_peak, 0.0) if p is not None)
            if worst > args.max_mib:
                raise Skipped(f"peak {worst:.0f} MiB > --max-mib {args.max_mib:.0f}")

            v_ms, v_n, v_guard, ke = time_calls(
                v_exe, (params, walkers), args.repeats, args.max_seconds
            )
            del v_exe
            g_ms, g_n, g_guard, grad = time_calls(
                g_exe, (params, walkers), args.repeats, args.max_seconds
            )
            del g_exe
            ke = np.asarray(ke, np.float64)
            grad = np.asarray(ravel_pytree(grad)[0], np.float64)
            if not np.all(np.isfinite(ke)):
                notes.append(f"n={n} {name}/{batching}: non-finite kinetic energies")
            if name == "Loop":
                ref_ke, ref_grad, ref_value_ms, ref_grad_ms = ke, grad, v_ms, g_ms
            if ref_ke is not None:
                diff = np.max(np.abs(ke - ref_ke) / np.maximum(np.abs(ref_ke), KE_FLOOR))
                diff_cell = f"{diff:.1e}"
                gdiff = np.linalg.norm(grad - ref_grad) / np.linalg.norm(ref_grad)
                notes.append(
                    f"n={n} {name}/{batching}: |grad - grad_loop| / |grad_loop| = {gdiff:.1e}; "
                    f"kinetic energy range [{ke.min():.4g}, {ke.max():.4g}] Ha"
                )
            else:
                diff_cell = "n/a (no Loop)"
            v_ratio = f"{v_ms / ref_value_ms:.2f}" if ref_value_ms else "n/a"
            g_ratio = f"{g_ms / ref_grad_ms:.2f}" if ref_grad_ms else "n/a"
            cells += [
                fmt_ms(v_ms, v_n, v_guard, args.repeats),
                v_ratio,
                fmt_ms(g_ms, g_n, g_guard, args.repeats),
                g_ratio,
                compile_cell,
                peak_cell,
                diff_cell,
            ]
        except Skipped as err:
            cells += [f"skipped: {err}", "", "", "", compile_cell, peak_cell, ""]
        except Exception as err:  # noqa: BLE001 - a failed method must not end the run
            cells += [f"error: {type(err).__name__}", "", "", "", "", "", ""]
            notes.append(f"n={n} {name}/{batching}: {type(err).__name__}: {str(err)[:300]}")
            if args.verbose:
                traceback.print_exc()
        print("| " + " | ".join(cells) + " |", flush=True)


def parse_layers(text: str) -> tuple[tuple[int, int], ...]:
    """'256x32,256x32' -> ((256, 32), (256, 32))."""
    return tuple(tuple(int(v) for v in item.split("x")) for item in text.split(","))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="4,8,16,30", help="electron counts, comma separated")
    parser.add_argument("--walkers", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=5, help="timed calls after 1 warm-up")
    parser.add_argument(
        "--layers",
        type=parse_layers,
        default=((256, 32),) * 4,
        help="one-/two-electron widths, e.g. 256x32,256x32,256x32,256x32",
    )
    parser.add_argument("--determinants", type=int, default=16)
    parser.add_argument("--dtype", default="float32")
    parser.add_argument(
        "--hessian-max", type=int, default=8, help="largest electron count for the dense Hessian"
    )
    parser.add_argument(
        "--max-seconds",
        type=float,
        default=60.0,
        help="a call slower than this stops further repeats of that measurement",
    )
    mem = mem_available_mib()
    parser.add_argument(
        "--max-mib",
        type=float,
        default=0.6 * mem if mem else float("inf"),
        help="skip a method whose compiled peak memory exceeds this "
        "(default: 60%% of MemAvailable at start)",
    )
    parser.add_argument(
        "--methods", default="", help="only these method names (comma separated, e.g. loop,forward)"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--quick",
        action="store_true",
        help="smoke test: sizes 4,8, layers (32,8)x2, 2 determinants, 32 walkers",
    )
    parser.add_argument("--verbose", action="store_true", help="print tracebacks of failures")
    args = parser.parse_args(argv)
    if args.quick:
        args.sizes, args.layers, args.determinants, args.walkers = "4,8", ((32, 8),) * 2, 2, 32
    args.methods = {m.strip().lower() for m in args.methods.split(",") if m.strip()}
    sizes = [int(s) for s in args.sizes.split(",")]

    print_header(args)
    notes: list[str] = []
    for n in sizes:
        run_size(n, args, notes)
    print()
    print(f"- load average at end: {load()}")
    for note in notes:
        print(f"- {note}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
