"""Checkpoint cost at the default network: write time, size, restore time, and the stall.

    python benchmarks/checkpoint.py [--systems LiH Ne] [--steps 8]

For each system builds the default FermiNet (3 x (64, 16), 16 determinants), SPRING and 256
walkers (as `psijax train` does, without pretraining), then times, after warm-up:
  step          a training step alone (dispatch to result ready), median of --steps
  step + save   a step followed by `Checkpoints.save` (the part the loop waits for: the
                device-to-host copy and the start of the asynchronous write), median
  written       save started -> files complete on disk (background thread), median
  restore       reading the newest checkpoint back onto the mesh, median of 3
  size          bytes on disk of one checkpoint
The stall is (step + save) - step; the target is at most one step's time.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import jax

import psijax
from psijax import config as config_lib
from psijax import hamiltonian, parallel, registry, system
from psijax.run.progress import Progress
from psijax.rundir import checkpoint
from psijax.system import sizing
from psijax.training.job import fresh_state, step_config
from psijax.training.state import abstract_train_state
from psijax.training.step import make_step


def du(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def measure(name: str, n_steps: int) -> dict[str, float]:
    config = config_lib.Config(system=name, pretrain_steps=0, burn_in_steps=2)
    config = sizing.for_system(config)  # walkers by the molecule, as a run
    molecule = system.resolve(name)
    mesh = parallel.make_mesh()
    net = registry.ansatz(molecule, config)
    local_energy = hamiltonian.for_config(molecule, config).local_energy(net)
    optimizer = registry.optimizer(config)
    sampler = registry.sampler(config, molecule)
    show = Progress(0, enabled=False)
    state = fresh_state(net, optimizer, sampler, molecule, config, mesh, show)
    step = make_step(
        net.log_abs, local_energy, optimizer, step_config(config), mesh, state, sampler
    )
    template = abstract_train_state(net, optimizer, config.walkers, molecule.n_electrons, mesh)
    identity = {"molecule": molecule.fingerprint()}
    root = Path(tempfile.mkdtemp(prefix="psijax-ckpt-bench-"))
    ckpt = checkpoint.Checkpoints(root, keep=2)
    try:
        for _ in range(2):  # compile the step, the checksum and orbax's first save
            state, _m = step(state)
            jax.block_until_ready(state)
            ckpt.save(state, identity)
            ckpt.wait()
        plain, saving, written = [], [], []
        for _ in range(n_steps):
            t0 = time.perf_counter()
            state, _m = step(state)
            jax.block_until_ready(state)
            plain.append(time.perf_counter() - t0)
        for _ in range(n_steps):
            t0 = time.perf_counter()
            state, _m = step(state)
            jax.block_until_ready(state)
            t1 = time.perf_counter()
            ckpt.save(state, identity)
            t2 = time.perf_counter()
            ckpt.wait()
            saving.append(t2 - t0)
            written.append(time.perf_counter() - t1)
        latest = ckpt.latest()
        size = du(ckpt.directory / str(latest))
        restores = []
        for _ in range(3):
            t0 = time.perf_counter()
            jax.block_until_ready(ckpt.restore(template, identity))
            restores.append(time.perf_counter() - t0)
    finally:
        ckpt.close()
        shutil.rmtree(root, ignore_errors=True)
    step_s = statistics.median(plain)
    both = statistics.median(saving)
    return {
        "electrons": molecule.n_electrons,
        "step": step_s,
        "step+save": both,
        "stall": both - step_s,
        "written": statistics.median(written),
        "restore": statistics.median(restores),
        "size": size,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--systems", nargs="+", default=["LiH", "Ne"])
    parser.add_argument("--steps", type=int, default=8)
    args = parser.parse_args()
    import orbax.checkpoint as ocp

    print(f"jax {jax.__version__}, orbax-checkpoint {ocp.__version__}, "
          f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"{jax.device_count()} device(s), load {os.getloadavg()[0]:.1f}")  # fmt: skip
    print("default network 3x(64,16), 8 dets, SPRING, 256 walkers; medians; seconds")
    head = f"{'system':<7}{'e':>3}{'step':>9}{'step+save':>11}{'stall':>9}{'stall/step':>12}"
    print(head + f"{'written':>9}{'restore':>9}{'size MB':>9}")
    for name in args.systems:
        r = measure(name, args.steps)
        print(f"{name:<7}{r['electrons']:>3}{r['step']:>9.3f}{r['step+save']:>11.3f}"
              f"{r['stall']:>9.3f}{r['stall'] / r['step']:>12.2f}{r['written']:>9.3f}"
              f"{r['restore']:>9.3f}{r['size'] / 1e6:>9.2f}")  # fmt: skip


if __name__ == "__main__":
    psijax.configure()  # the process-wide set-up psijax's own jobs do
    main()
