"""Per-device memory and communication of the compiled training step on 1..8 devices.

    python benchmarks/step_scale.py [--system Ne] [--layers 256,32x4] [--determinants 16]
                                    [--walkers 4096] [--devices 1,2,4,8] [--unsplit]
                                    [--jacobian-blocks B]

Compiles (never runs) the SPRING training step of ``psijax train`` on fake CPU devices
and prints, per device count: the parameters, the compiled step's per-device memory
(``memory_analysis()``: arguments + outputs + temporaries - aliased), the largest
collective in its HLO and the total elements its collectives move, and both as a ratio
to one device's share of the [walkers, params] jacobian (W x P / d). ``--unsplit`` hands
SPRING no mesh, so that GSPMD lays out its linear algebra (the step before the split
natural gradient): run both for an A/B in the same session. ``--jacobian-blocks B`` forms
the jacobian in B parameter blocks, never whole (psijax/optim/jacobian.py).
"""

from __future__ import annotations

import argparse
import os
import platform
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--system", default="Ne")
    parser.add_argument("--layers", default="256,32x4", help="single,pair x depth")
    parser.add_argument("--determinants", type=int, default=16)
    parser.add_argument("--walkers", type=int, default=4096)
    parser.add_argument("--devices", default="1,2,4,8")
    parser.add_argument("--unsplit", action="store_true", help="SPRING without the mesh")
    parser.add_argument("--jacobian-blocks", type=int, default=1)
    args = parser.parse_args()
    counts = [int(x) for x in args.devices.split(",")]

    import jax

    jax.config.update("jax_num_cpu_devices", max(counts))
    import optax

    from psijax import config as config_lib
    from psijax import hamiltonian, parallel, registry, system
    from psijax.parallel.hlo import collectives
    from psijax.training.job import step_config
    from psijax.training.state import abstract_train_state
    from psijax.training.step import make_step

    width, depth = args.layers.split("x")
    layer = tuple(int(x) for x in width.split(","))
    molecule = system.preset(args.system)
    config = config_lib.Config(
        system=args.system,
        walkers=args.walkers,
        layers=(layer,) * int(depth),
        determinants=args.determinants,
        jacobian_blocks=args.jacobian_blocks,
    )
    net = registry.ansatz(molecule, config)
    optimizer = registry.optimizer(config)
    if args.unsplit:
        inner = optimizer
        optimizer = optax.GradientTransformationExtraArgs(
            inner.init, lambda g, s, p=None, **kw: inner.update(g, s, p, **{**kw, "mesh": None})
        )
    local_energy = hamiltonian.for_config(molecule, config).local_energy(net)
    sampler = registry.sampler(config, molecule)

    print(f"# {args.system}, FermiNet {args.layers}, {args.determinants} determinants, "
          f"{args.walkers} walkers, {'unsplit' if args.unsplit else 'split'} SPRING, "
          f"jacobian in {args.jacobian_blocks} block(s)")  # fmt: skip
    print(f"# jax {jax.__version__}, {platform.python_version()}, {platform.machine()}, "
          f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}")  # fmt: skip
    header = ("devices", "params", "memory MiB", "vs 1 device", "largest collective",
              "its kind", "vs W*P/d", "all collectives", "compile s")  # fmt: skip
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    first = None
    for d in counts:
        mesh = parallel.make_mesh(d)
        template = abstract_train_state(net, optimizer, config.walkers, molecule.n_electrons, mesh)
        step = make_step(
            net.log_abs, local_energy, optimizer, step_config(config), mesh, template, sampler
        )
        t = time.perf_counter()
        compiled = step.lower(template).compile()
        seconds = time.perf_counter() - t
        mem = compiled.memory_analysis()
        total = (
            mem.argument_size_in_bytes + mem.output_size_in_bytes + mem.temp_size_in_bytes
            - mem.alias_size_in_bytes
        )  # fmt: skip
        first = first or total
        n_params = sum(x.size for x in jax.tree.leaves(template.params))
        share = args.walkers * n_params / d
        found = collectives(compiled.as_text()) or [("none", 0)]
        kind, largest = max(found, key=lambda x: x[1])
        moved = sum(size for _, size in found)
        row = (d, f"{n_params:,}", f"{total / 2**20:,.0f}", f"{total / first:.2f}",
               f"{largest:,}", kind, f"{largest / share:.3f}", f"{moved:,}",
               f"{seconds:.0f}")  # fmt: skip
        print("| " + " | ".join(map(str, row)) + " |", flush=True)


if __name__ == "__main__":
    import psijax

    psijax.configure()  # the process-wide set-up psijax's own jobs do
    main()
