"""Benchmark the Laplacian operators on a FermiNet-sized network.

For every size and every (operator, batching) pair this measures, on the default
JAX backend with default XLA options:

* value: jit of ``map_walkers(kinetic_energy)`` over the batch of walkers;
* grad:  jit of the gradient w.r.t. the parameters of the batch-mean kinetic energy;
* compile: seconds to trace, lower and compile each (``jit(...).lower().compile()``);
* peak memory: temp + argument + output bytes from the compiled executable's
  ``memory_analysis()`` (XLA's static buffer assignment, not host RSS);
* max rel diff: ``max_i |ke_i - ke_loop_i| / max(|ke_loop_i|, 1 Ha)`` against the
  Loop operator run on the same walkers and parameters (the relative gradient
  difference ``|g - g_loop| / |g_loop|`` is listed under the table).

Times are medians over ``--repeats`` calls after one warm-up call. Every
(size, method) runs in its own Python process, so that a crash, an out-of-memory
kill or a deadlock in XLA's CPU runtime (seen with the batched Hessian gradient on
2 cores, docs/benchmarks.md) costs one row, not the run: a worker that uses no CPU
for ``--stall-seconds`` is killed and reported as ``Hang``. Rows are printed as
they are measured. ``python benchmarks/laplacian.py --quick`` is a smoke test.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import threading
import time

MIB = 2**20
KE_FLOOR = 1.0  # Hartree: denominator floor of the relative difference


def method_table(n_electrons: int, args: argparse.Namespace) -> list[tuple[str, str, int | None]]:
    """(method name, batching label, chunk_size); Loop first, it is the reference."""
    chunk = args.chunk_size
    rows = [
        ("Loop", "vmap", None),
        ("Forward", "vmap", None),
        ("ForwardSparse(0.6)", "vmap", None),
        ("ForwardSparse(6)", "vmap", None),
        ("Forward", f"chunked({chunk})", chunk),
        ("folx", "vmap", None),
        ("folx-sparse(6)", "vmap", None),
    ]
    if n_electrons <= args.hessian_max:
        rows.append(("Hessian", "vmap", None))
    if args.methods:
        rows = [r for r in rows if r[0].lower() in args.methods or r[0] == "Loop"]
    return rows


def make_operator(name: str):
    from psijax.laplacian import Forward, ForwardSparse, Hessian, Loop

    return {
        "Loop": Loop,
        "Forward": Forward,
        "ForwardSparse(0.6)": lambda: ForwardSparse(0.6),
        "ForwardSparse(6)": lambda: ForwardSparse(6),
        "Hessian": Hessian,
        "folx": lambda: folx_direct(0),
        "folx-sparse(6)": lambda: folx_direct(6),
    }[name]()


def folx_direct(sparsity_threshold: int):
    """folx's forward Laplacian called directly, as its README shows, outside psijax's
    wrapping (psijax/laplacian/_folx.py): the peer the operators are measured against."""
    import folx

    def operator(f):
        def run(x):
            flat = lambda y: f(y.reshape(x.shape))
            out = folx.forward_laplacian(flat, sparsity_threshold=sparsity_threshold)(x.reshape(-1))
            return out.x, out.jacobian.dense_array.reshape(x.shape), out.laplacian

        return run

    return operator


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
    except Exception:
        return "n/a"


def print_header(args: argparse.Namespace) -> None:
    import jax
    import numpy as np

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
    if mem is not None:
        print(f"- memory available at start: {mem / 1024:.1f} GiB")
    print(f"- load average (1/5/15 min) at start: {load()}")
    print(f"- XLA_FLAGS: {os.environ.get('XLA_FLAGS', '(unset)')!r}")
    layers = "x".join(map(str, args.layers[0])) + f" x {len(args.layers)}"
    if len(set(args.layers)) > 1:
        layers = str(args.layers)
    print(
        f"- network: FermiNet layers ({layers}), {args.determinants} determinants, "
        f"full_det, {args.dtype}; {args.walkers} walkers ~ N(0, 1) bohr; "
        "one nucleus at the origin; spin-balanced"
    )
    print(
        f"- timing: median of {args.repeats} calls after 1 warm-up; a call over "
        f"{args.max_seconds:g} s stops further calls († , n = calls timed; n=1 with a "
        f"slow warm-up means the warm-up call is the measurement); a value or grad whose "
        f"compiled peak exceeds {args.max_mib:.0f} MiB is not run; one process per row"
    )
    print()
    print(
        "| n_electrons | method | batching | value ms | value ratio vs loop | grad ms "
        "| grad ratio vs loop | compile s (value/grad) | peak MiB (value/grad) "
        "| max rel diff vs loop |"
    )
    print("|---:|---|---|---:|---:|---:|---:|---:|---:|---:|")
    sys.stdout.flush()


# ------------------------------------------------------------- worker process
def worker(spec: dict) -> None:
    """Measure one (size, method, batching); results go to spec['out'] as JSON."""
    import functools

    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.flatten_util import ravel_pytree

    from psijax.ansatz.ferminet import FermiNet
    from psijax.hamiltonian import kinetic_energy
    from psijax.parallel.batching import map_walkers

    result: dict = {}

    def save() -> None:
        tmp = spec["out"] + ".tmp"
        with open(tmp, "w") as fh:
            json.dump(result, fh)
        os.replace(tmp, spec["out"])

    def fail(stage: str, err: BaseException) -> None:
        result[stage + "_error"] = type(err).__name__
        result[stage + "_message"] = str(err)[:300]
        save()

    parent = os.getppid()

    def orphan_watch() -> None:  # end with the benchmark that started this worker
        while os.getppid() == parent:
            time.sleep(5.0)
        os._exit(1)

    threading.Thread(target=orphan_watch, daemon=True).start()

    n = spec["n"]
    net = FermiNet(
        (n + 1) // 2,
        n // 2,
        nuclei=((0.0, 0.0, 0.0),),
        layers=tuple(tuple(layer) for layer in spec["layers"]),
        n_determinants=spec["determinants"],
        full_det=True,
    )
    dtype = jnp.dtype(spec["dtype"])
    key_params, key_walkers = jax.random.split(jax.random.PRNGKey(spec["seed"]))
    params = net.init(key_params, dtype)
    walkers = jax.random.normal(key_walkers, (spec["walkers"], n, 3), dtype)
    ke_one = functools.partial(kinetic_energy, make_operator(spec["method"]), net.log_abs)
    chunk = spec["chunk"]

    def value_fn(p, w):
        return map_walkers(ke_one, p, w, chunk_size=chunk)

    def grad_fn(p, w):
        return jax.grad(lambda q: jnp.mean(value_fn(q, w)))(p)

    def compile_fn(fn):
        start = time.perf_counter()
        compiled = jax.jit(fn).lower(params, walkers).compile()
        seconds = time.perf_counter() - start
        peak = None
        try:
            stats = compiled.memory_analysis()
            if stats is not None:
                peak = (
                    stats.temp_size_in_bytes
                    + stats.argument_size_in_bytes
                    + stats.output_size_in_bytes
                ) / MIB
        except Exception:  # not every backend implements it
            peak = None
        return compiled, seconds, peak

    def time_calls(compiled, stage: str):
        def call():
            start = time.perf_counter()
            out = jax.block_until_ready(compiled(params, walkers))
            return time.perf_counter() - start, out

        warm, out = call()
        times: list[float] = []
        guarded = warm > spec["max_seconds"]
        if guarded:  # the warm-up call is the only measurement
            times = [warm]
        else:
            for _ in range(spec["repeats"]):
                seconds, out = call()
                times.append(seconds)
                result[stage + "_times"] = times
                if seconds > spec["max_seconds"]:
                    guarded = True
                    break
        result[stage + "_ms"] = statistics.median(times) * 1e3
        result[stage + "_n"] = len(times)
        result[stage + "_guard"] = guarded
        result[stage + "_warmup_s"] = warm
        return out

    executables = {}
    for stage, fn in (("value", value_fn), ("grad", grad_fn)):
        try:
            executables[stage], result[stage + "_compile_s"], result[stage + "_peak_mib"] = (
                compile_fn(fn)
            )
        except Exception as err:
            fail(stage, err)
        peak = result.get(stage + "_peak_mib")
        if peak is not None and peak > spec["max_mib"]:  # do not risk the host's memory
            result[stage + "_skipped"] = f"peak {peak:.0f} MiB > --max-mib {spec['max_mib']:.0f}"
            executables.pop(stage, None)
        save()

    if "value" in executables:
        try:
            ke = np.asarray(time_calls(executables.pop("value"), "value"), np.float64)
            np.save(spec["out"] + ".ke.npy", ke)
            result["ke_min"], result["ke_max"] = float(ke.min()), float(ke.max())
            result["ke_finite"] = bool(np.all(np.isfinite(ke)))
        except Exception as err:
            fail("value", err)
        save()
    if "grad" in executables:
        try:
            grad = time_calls(executables.pop("grad"), "grad")
            np.save(spec["out"] + ".grad.npy", np.asarray(ravel_pytree(grad)[0], np.float64))
        except Exception as err:
            fail("grad", err)
        save()


# ------------------------------------------------------------- parent process
def cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of a process (all threads), or None off Linux."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


def run_worker(spec: dict, args: argparse.Namespace) -> tuple[dict, str | None]:
    """(results the worker saved, why it ended abnormally or None)."""
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", json.dumps(spec)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    last_cpu, last_progress, start = cpu_seconds(proc.pid), time.monotonic(), time.monotonic()
    why = None
    while proc.poll() is None:
        time.sleep(2.0)
        now, cpu = time.monotonic(), cpu_seconds(proc.pid)
        if cpu is not None and last_cpu is not None and cpu > last_cpu + 0.05:
            last_cpu, last_progress = cpu, now
        if now - last_progress > args.stall_seconds:
            why = f"Hang (no CPU use for {args.stall_seconds:g} s)"
        elif now - start > args.method_timeout:
            why = f"Timeout (> {args.method_timeout:g} s)"
        if why:
            proc.kill()
            break
    _, stderr = proc.communicate()
    if why is None and proc.returncode != 0:
        tail = (stderr or "").strip().splitlines()[-1:] or [""]
        why = f"exit {proc.returncode}: {tail[0][:200]}"
    try:
        with open(spec["out"]) as fh:
            result = json.load(fh)
    except (OSError, ValueError):
        result = {}
    return result, why


def fmt_time(result: dict, stage: str, repeats: int) -> str:
    ms = result[stage + "_ms"]
    text = f"{ms:.1f}" if ms < 1e4 else f"{ms:.0f}"
    if result[stage + "_guard"] or result[stage + "_n"] != repeats:
        text += f" † (n={result[stage + '_n']})"
    return text


def fmt_num(value, spec: str) -> str:
    return "n/a" if value is None else format(value, spec)


def time_cell(
    result: dict, stage: str, why: str | None, label: str, notes: list[str], repeats: int
) -> str:
    """The table cell of one timing: the median, the error class, or why it is missing."""
    if stage + "_ms" in result:
        return fmt_time(result, stage, repeats)
    if stage + "_error" in result:
        notes.append(f"{label} {stage}: {result[stage + '_error']}: {result[stage + '_message']}")
        return f"error: {result[stage + '_error']}"
    if stage + "_skipped" in result:
        return "not run (memory)"
    return f"error: {why.split(' ')[0]}" if why else "n/a"


def run_size(n: int, args: argparse.Namespace, workdir: str, notes: list[str]) -> None:
    import numpy as np

    notes.append(f"n={n}: load average at start of size {load()}")
    ref: dict = {}
    for name, batching, chunk in method_table(n, args):
        stem = f"n{n}-{name}-{batching}".replace("(", "").replace(")", "")
        out = os.path.join(workdir, stem + ".json")
        spec = {
            "n": n, "method": name, "chunk": chunk, "layers": args.layers,
            "determinants": args.determinants, "dtype": args.dtype, "walkers": args.walkers,
            "seed": args.seed, "repeats": args.repeats, "max_seconds": args.max_seconds,
            "max_mib": args.max_mib, "out": out,
        }  # fmt: skip
        label = f"n={n} {name}/{batching}"
        for attempt in range(1 + args.hang_retries):
            for leftover in (out, out + ".ke.npy", out + ".grad.npy"):
                if os.path.exists(leftover):
                    os.remove(leftover)
            result, why = run_worker(spec, args)
            if why:
                notes.append(f"{label}: worker (attempt {attempt + 1}) ended: {why}")
            if not (why and why.startswith("Hang")):
                break

        value_cell = time_cell(result, "value", why, label, notes, args.repeats)
        grad_cell = time_cell(result, "grad", why, label, notes, args.repeats)
        for stage in ("value", "grad"):
            if stage + "_skipped" in result:
                notes.append(f"{label} {stage}: not run, {result[stage + '_skipped']}")
        is_ref = name == "Loop"
        ratios = {}
        for stage in ("value", "grad"):
            ms = result.get(stage + "_ms")
            if is_ref and ms is not None:
                ref[stage + "_ms"] = ms
            ratios[stage] = (
                f"{ms / ref[stage + '_ms']:.2f}"
                if ms is not None and ref.get(stage + "_ms")
                else "n/a"
            )
        compile_cell = (
            f"{fmt_num(result.get('value_compile_s'), '.1f')} / "
            f"{fmt_num(result.get('grad_compile_s'), '.1f')}"
        )
        peak_cell = (
            f"{fmt_num(result.get('value_peak_mib'), '.0f')} / "
            f"{fmt_num(result.get('grad_peak_mib'), '.0f')}"
        )
        diff_cell = "n/a"
        if os.path.exists(out + ".ke.npy"):
            ke = np.load(out + ".ke.npy")
            if is_ref:
                ref["ke"] = ke
            if "ke" in ref:
                rel = np.abs(ke - ref["ke"]) / np.maximum(np.abs(ref["ke"]), KE_FLOOR)
                diff_cell = f"{np.max(rel):.1e}"
                notes.append(
                    f"{label}: kinetic energy vs Loop: median rel diff {np.median(rel):.1e}, "
                    f"{np.mean(rel > 1e-2):.1%} of walkers > 1e-2, "
                    f"{np.mean(rel > 1e-3):.1%} > 1e-3"
                )
            if not result.get("ke_finite", True):
                notes.append(f"{label}: non-finite kinetic energies")
            notes.append(
                f"{label}: kinetic energy range [{result['ke_min']:.4g}, {result['ke_max']:.4g}] Ha"
            )
        if os.path.exists(out + ".grad.npy"):
            grad = np.load(out + ".grad.npy")
            if is_ref:
                ref["grad"] = grad
            if "grad" in ref:
                rel = np.linalg.norm(grad - ref["grad"]) / np.linalg.norm(ref["grad"])
                notes.append(f"{label}: |grad - grad_loop| / |grad_loop| = {rel:.1e}")
        for stage in ("value", "grad"):
            if result.get(stage + "_guard"):
                times = result.get(stage + "_times") or []
                notes.append(
                    f"{label} {stage}: warm-up {result[stage + '_warmup_s']:.1f} s, "
                    f"timed calls {[round(t, 1) for t in times]} s"
                )
        cells = [str(n), name, batching, value_cell, ratios["value"], grad_cell,
                 ratios["grad"], compile_cell, peak_cell, diff_cell]  # fmt: skip
        print("| " + " | ".join(cells) + " |", flush=True)


def parse_layers(text: str) -> tuple[tuple[int, int], ...]:
    """'256x32,256x32' -> ((256, 32), (256, 32))."""
    return tuple(tuple(int(v) for v in item.split("x")) for item in text.split(","))


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--worker"]:
        worker(json.loads(argv[1]))
        return
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
        "--chunk-size", type=int, default=64, help="walkers per lax.map step of the chunked variant"
    )
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
        help="do not run a method whose compiled peak memory exceeds this "
        "(default: 60%% of MemAvailable at start)",
    )
    parser.add_argument(
        "--stall-seconds",
        type=float,
        default=60.0,
        help="kill a worker that used no CPU for this long (deadlock)",
    )
    parser.add_argument(
        "--hang-retries",
        type=int,
        default=1,
        help="run a worker again this many times after it hung",
    )
    parser.add_argument(
        "--method-timeout",
        type=float,
        default=3600.0,
        help="kill a worker running longer than this",
    )
    parser.add_argument(
        "--methods",
        default="",
        help="only these method names besides Loop (comma separated, e.g. forward,hessian)",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--quick",
        action="store_true",
        help="smoke test: sizes 4,8, layers (32,8)x2, 2 determinants, 32 walkers, chunks of 16",
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.sizes, args.layers, args.determinants = "4,8", ((32, 8),) * 2, 2
        args.walkers, args.chunk_size = 32, 16
    args.methods = {m.strip().lower() for m in args.methods.split(",") if m.strip()}
    sizes = [int(s) for s in args.sizes.split(",")]

    print_header(args)
    notes: list[str] = []
    with tempfile.TemporaryDirectory(prefix="psijax-bench-") as workdir:
        for n in sizes:
            run_size(n, args, workdir, notes)
    print()
    print(
        f"- load average at end: {load()}, {datetime.datetime.now().isoformat(timespec='seconds')}"
    )
    for note in notes:
        print(f"- {note}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
