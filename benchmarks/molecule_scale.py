"""The training step at 14, 30 and 42 electrons: time, compile, memory and where time goes.

    python benchmarks/molecule_scale.py [--systems N2,C4H6,C6H6] [--ansatz ferminet,psiformer]
                                        [--sizes default,production] [--steps 3]
                                        [--ferminet /tmp/peers/venv-ferminet/bin/python]
                                        [--launch] [--peer-sizes default] [--out scale.jsonl]
                                        [--timeout 3600]

Rows: N2 (psijax's preset), trans-1,3-butadiene C4H6 (30 electrons) and benzene C6H6 (42),
for FermiNet and PsiFormer at psijax's defaults and at the production sizes of their papers
(FermiNet 4 x (256, 32); PsiFormer 4 layers of 4 heads x 64; 16 determinants and 4,096
walkers both). Each row builds the default training step (SPRING, the default Laplacian
operator and walker chunking) in its own process on one CPU device, compiles it (seconds,
and ``memory_analysis()``: arguments + outputs + temporaries - aliased, XLA's static
buffer plan), runs one step (the first call) and then ``--steps`` steps under
jax.profiler (the median step and its split into MCMC, local energy, jacobian and
optimiser, from benchmarks/step_profile.py; ``--steps 0`` compiles only), and reports the
process's peak resident memory. The step is compiled as ``psijax train`` compiles it
(``psijax.training.memory.compile_within``: a plan past 80% of the free memory is compiled
again with smaller walker chunks and more jacobian blocks; the table names the settings).
A row whose compiled plan exceeds ``--max-mib`` is compiled but not run; a row past
``--timeout`` is killed and reported so. No pretraining: a step's cost does not depend on
the parameters.

``--launch`` adds ``psijax train`` itself at the default sizes, as a user runs it
(Hartree-Fock, pretraining, burn-in, no compilation cache): seconds from exec to the
first training step, and the median step, timed by its ``on_step`` callback.
``--ferminet PYTHON`` adds FermiNet's own code (benchmarks/peers/ferminet_lih.py in its own
venv, KFAC, its default Laplacian) at the same molecule and sizes: launch to the first
training step (its pretraining and compile included) and the median step after the first
``--peer-skip`` steps. Results go, one JSON line per row, to ``--out`` (rows already there
are not measured again), and the table is printed at the end.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
MIB = 2**20
ANGSTROM = 1.8897261246  # bohr


def _butadiene() -> list[tuple[str, tuple[float, float, float]]]:
    """trans-1,3-butadiene in the xy plane: C=C 1.34, C-C 1.46, C-H 1.09 angstrom, 120 deg."""

    def step(p, angle, length):
        a = math.radians(angle)
        return (p[0] + length * math.cos(a), p[1] + length * math.sin(a))

    c1 = (0.0, 0.0)
    c2 = step(c1, 30, 1.34)
    c3 = step(c2, -30, 1.46)
    c4 = step(c3, 30, 1.34)
    hydrogens = [step(c1, 150, 1.09), step(c1, -90, 1.09), step(c2, 90, 1.09),
                 step(c3, -90, 1.09), step(c4, -30, 1.09), step(c4, 90, 1.09)]  # fmt: skip
    atoms = [("C", p) for p in (c1, c2, c3, c4)] + [("H", p) for p in hydrogens]
    return [(s, (x * ANGSTROM, y * ANGSTROM, 0.0)) for s, (x, y) in atoms]


def _benzene() -> list[tuple[str, tuple[float, float, float]]]:
    """Benzene, D6h: C-C 1.39, C-H 1.09 angstrom."""
    atoms = []
    for symbol, radius in (("C", 1.39), ("H", 1.39 + 1.09)):
        for k in range(6):
            a = math.radians(60 * k)
            atoms.append((symbol, (radius * ANGSTROM * math.cos(a),
                                   radius * ANGSTROM * math.sin(a), 0.0)))  # fmt: skip
    return atoms


MOLECULES = {
    "N2": [("N", (0.0, 0.0, 0.0)), ("N", (2.068, 0.0, 0.0))],
    "C4H6": _butadiene(),
    "C6H6": _benzene(),
}
SIZES = {
    ("ferminet", "default"): {},
    ("ferminet", "production"): dict(layers=((256, 32),) * 4, determinants=16, walkers=4096),
    ("psiformer", "default"): dict(ansatz="psiformer"),
    ("psiformer", "production"): dict(
        ansatz="psiformer", attention_layers=4, attention_heads=4, attention_head_dim=64,
        determinants=16, walkers=4096,
    ),
}  # fmt: skip


def atom_string(name: str) -> str:
    return "; ".join(f"{s} {x:.6f} {y:.6f} {z:.6f}" for s, (x, y, z) in MOLECULES[name])


def measure(row: dict) -> dict:
    """One row, in this process: compile, run, profile (see the module docstring)."""
    import resource

    import jax

    from psijax import config as config_lib
    from psijax.training import memory

    sys.path.insert(0, HERE)
    from step_profile import PARTS, compile_as_train, random_job, trace_parts

    values = dict(system=atom_string(row["system"]), **SIZES[(row["ansatz"], row["size"])])
    config = config_lib.from_dict(values)
    job = random_job(config)
    molecule, net, state = job.molecule, job.net, job.state
    laplacian = type(job.local_energy.hamiltonian.laplacian).__name__
    out = dict(row, electrons=molecule.n_electrons, walkers=config.walkers,
               params=sum(x.size for x in jax.tree.leaves(state.params)),
               laplacian=laplacian, network=net.describe())  # fmt: skip
    compiled, compiled_as = compile_as_train(job, config)
    out.update(compiled_as)
    if row["steps"] == 0:
        out["skipped"] = "compiled only"
        return out
    if out["plan_mib"] > min(row["max_mib"], (memory.budget() or float("inf")) / MIB):
        out["skipped"] = f"plan {out['plan_mib']:.0f} MiB > {row['max_mib']:.0f} MiB"
        return out
    t = time.perf_counter()
    state, metrics = compiled(state)
    jax.block_until_ready(metrics)
    out["first_step_s"] = time.perf_counter() - t
    out["load"] = os.getloadavg()[0]
    state, trace = trace_parts(compiled, state, row["steps"])
    out["step_s"] = statistics.median(trace.walls)
    total = sum(trace.busy.values()) or 1
    out["parts"] = {p: trace.busy[p] / total for p in PARTS if trace.busy[p]}
    out["busy_threads"] = sum(trace.threads.values()) / 1e9 / sum(trace.walls)
    out["peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return out


def ferminet(row: dict, python: str, iterations: int, skip: int) -> dict:
    """FermiNet's own training (benchmarks/peers/ferminet_lih.py) at the row's sizes."""
    up_down = _electrons(row["system"])
    overrides = SIZES[("ferminet", row["size"])]
    layers = overrides.get("layers", ((64, 16),) * 3)
    with tempfile.TemporaryDirectory(prefix="psijax-scale-ferminet-") as tmp:
        spec = os.path.join(tmp, "molecule.json")
        with open(spec, "w") as f:
            json.dump({"atoms": MOLECULES[row["system"]], "electrons": up_down}, f)
        run = os.path.join(tmp, "run")
        cmd = [python, os.path.join(HERE, "peers", "ferminet_lih.py"), "--system", spec,
               "--iterations", str(iterations), "--out", run,
               "--batch-size", str(overrides.get("walkers", 256)),
               "--determinants", str(overrides.get("determinants", 16)),
               "--hidden-dims", f"{layers[0][0]},{layers[0][1]}x{len(layers)}"]  # fmt: skip
        subprocess.run(cmd, check=True, timeout=row["timeout"], capture_output=True)
        with open(os.path.join(run, "train_stats.csv")) as f:
            seconds = [float(r["seconds"]) for r in csv.DictReader(f)]
    steps = [b - a for a, b in zip(seconds[skip:], seconds[skip + 1 :], strict=False)]
    return dict(row, electrons=sum(up_down), walkers=overrides.get("walkers", 256),
                first_step_s=seconds[0], step_s=statistics.median(steps),
                load=os.getloadavg()[0])  # fmt: skip


LAUNCH = """
import json, sys, tempfile, time
t_script = time.time()
sys.path.insert(0, {peers!r})
from _clock import process_start_wall
start = process_start_wall(t_script)
import psijax
seen = []
with tempfile.TemporaryDirectory() as out:
    psijax.train(system={atoms!r}, steps={steps}, out=out, compilation_cache="",
                 progress=False, on_step=lambda i, m: seen.append(time.time() - start))
print(json.dumps(seen))
"""


def launch(row: dict, iterations: int, skip: int) -> dict:
    """``psijax train`` itself at the defaults, as a user runs it (pretraining, burn-in,
    no compilation cache): seconds from exec to the first training step's metrics (they
    arrive one step late, as a peer's row does after its step), and the median step."""
    code = LAUNCH.format(peers=os.path.join(HERE, "peers"), atoms=atom_string(row["system"]),
                         steps=iterations)  # fmt: skip
    done = subprocess.run([sys.executable, "-c", code], check=True, timeout=row["timeout"],
                          capture_output=True, text=True)  # fmt: skip
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    steps = [b - a for a, b in zip(seen[skip:], seen[skip + 1 :], strict=False)]
    return dict(row, electrons=sum(_electrons(row["system"])), walkers=256,
                first_step_s=seen[0], step_s=statistics.median(steps),
                load=os.getloadavg()[0])  # fmt: skip


def _electrons(name: str) -> tuple[int, int]:
    from psijax import system

    molecule = system.resolve(atom_string(name))
    return molecule.n_up, molecule.n_down


def _run_row(row: dict) -> dict:
    """``measure(row)`` in a fresh process (a crash or memory kill costs one row)."""
    cmd = [sys.executable, __file__, "--row", json.dumps(row)]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=row["timeout"])
    except subprocess.TimeoutExpired:
        return dict(row, error=f"not finished in {row['timeout']:.0f} s")
    lines = [x for x in done.stdout.splitlines() if x.startswith("{")]
    if done.returncode or not lines:
        tail = (done.stderr.strip().splitlines() or ["?"])[-1]
        return dict(row, error=f"exit {done.returncode}: {tail[:160]}")
    return json.loads(lines[-1])


def _fmt(x, spec: str) -> str:
    return "" if x is None else format(x, spec)


def table(rows: list[dict]) -> None:
    head = ("system", "electrons", "code", "sizes", "params", "walkers", "Laplacian",
            "chunk / blocks", "compile s", "first step s", "median step s", "plan MiB",
            "peak RSS MiB", "MCMC / local energy / jacobian / optimiser", "busy threads",
            "load")  # fmt: skip
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for r in rows:
        parts = r.get("parts")
        split = " / ".join(
            f"{parts.get(p, 0):.0%}" for p in ("mcmc", "local_energy", "jacobian", "optimizer")
        ) if parts else ""  # fmt: skip
        note = r.get("error") or r.get("skipped")
        cells = (r["system"], r.get("electrons", ""), r["code"], r["size"],
                 _fmt(r.get("params"), ","), r.get("walkers", ""), r.get("laplacian", ""),
                 f"{r.get('chunk_size') or 'auto'} / {r['jacobian_blocks']}"
                 if "jacobian_blocks" in r else "",
                 _fmt(r.get("compile_s"), ".0f"), _fmt(r.get("first_step_s"), ".1f"),
                 note or _fmt(r.get("step_s"), ".2f"),
                 _fmt(r.get("plan_mib"), ",.0f"), _fmt(r.get("peak_rss_mib"), ",.0f"), split,
                 _fmt(r.get("busy_threads"), ".2f"), _fmt(r.get("load"), ".1f"))  # fmt: skip
        print("| " + " | ".join(map(str, cells)) + " |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--systems", default="N2,C4H6,C6H6")
    parser.add_argument("--ansatz", default="ferminet,psiformer")
    parser.add_argument("--sizes", default="default,production")
    parser.add_argument(
        "--steps", type=int, default=3, help="profiled steps after the first (0: compile only)"
    )
    parser.add_argument("--max-mib", type=float, default=16 * 1024, help="run no larger plan")
    parser.add_argument("--timeout", type=float, default=3600.0, help="seconds per row")
    parser.add_argument("--ferminet", default=None, help="python of FermiNet's venv")
    parser.add_argument(
        "--launch", action="store_true", help="also psijax train itself (default sizes)"
    )
    parser.add_argument("--peer-sizes", default="default", help="sizes FermiNet runs at")
    parser.add_argument("--peer-iterations", type=int, default=20)
    parser.add_argument("--peer-skip", type=int, default=5)
    parser.add_argument("--out", default="molecule_scale.jsonl")
    parser.add_argument("--row", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.row:
        print(json.dumps(measure(json.loads(args.row))), flush=True)
        return

    import jax
    from vmc_step import _cpu_name

    print(f"# {time.strftime('%Y-%m-%d %H:%M')}, {_cpu_name()}, {os.cpu_count()} cores, "
          f"python {platform.python_version()}, jax {jax.__version__}; "
          f"command: python benchmarks/molecule_scale.py {' '.join(sys.argv[1:])}")  # fmt: skip
    done = {}
    if os.path.exists(args.out):
        with open(args.out) as f:
            for line in f:
                r = json.loads(line)
                done[(r["system"], r["code"], r["size"])] = r
    rows = []
    for size in args.sizes.split(","):
        for name in args.systems.split(","):
            codes = [f"psijax {a}" for a in args.ansatz.split(",")]
            codes += ["psijax train (launch)"] if args.launch and size == "default" else []
            codes += ["FermiNet (own code)"] if args.ferminet and size in args.peer_sizes else []
            for code in codes:
                key = (name, code, size)
                if key not in done:
                    row = dict(system=name, code=code, size=size, steps=args.steps,
                               max_mib=args.max_mib, timeout=args.timeout)  # fmt: skip
                    print(f"# measuring {key}", flush=True)
                    if code.startswith("psijax train"):
                        try:
                            done[key] = launch(row, args.peer_iterations, args.peer_skip)
                        except (subprocess.SubprocessError, OSError) as e:
                            done[key] = dict(row, error=type(e).__name__)
                    elif code.startswith("FermiNet"):
                        try:
                            done[key] = ferminet(row, args.ferminet, args.peer_iterations,
                                                 args.peer_skip)  # fmt: skip
                        except (subprocess.SubprocessError, OSError) as e:
                            done[key] = dict(row, error=type(e).__name__)
                    else:
                        done[key] = _run_row(dict(row, ansatz=code.split()[1]))
                    with open(args.out, "a") as f:
                        f.write(json.dumps(done[key]) + "\n")
                rows.append(done[key])
    table(rows)


if __name__ == "__main__":
    import psijax

    psijax.configure()  # the process-wide set-up psijax's own jobs do
    main()
