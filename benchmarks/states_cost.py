"""What K states cost: one K-state step against K ground-state steps, and two ways to the
total local energy.

    python benchmarks/states_cost.py [--system LiH] [--states 1 2 3] [--walkers 256]
                                     [--steps 12] [--repeats 10] [--step-only]
                                     [--optimizer spring] [--networks shared separate]

Part 1 builds the training step of the default job (FermiNet defaults, SPRING) for each
K in ``--states`` on the same molecule, runs it ``--steps`` times after compiling, and
prints the median step time (the steps of all K taken in turn, so that load from other
work hits them alike) against K times the ground state's (what K separate runs
would cost per step), for each way of building K states in ``--networks`` (one network
whose determinants the states share out, or a network per state). Part 2 times, on the
same walkers and random parameters, the total
local energy of the K-state wavefunction two ways: per state (the K x K local energies
of the energy matrix, what psijax does: it gives each state's energy too) and through the
Laplacian of the whole determinant over all K copies of the electrons (the trace only).
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np
from ecp_cost import _median_seconds  # benchmarks/: the same median of timed calls

import psijax
from psijax import hamiltonian, laplacian, parallel, registry, sampling, system
from psijax.config import Config
from psijax.parallel.batching import map_walkers
from psijax.training.job import step_config
from psijax.training.state import abstract_train_state, train_state
from psijax.training.step import make_step


def _walkers(molecule, k: int, n: int):
    w = sampling.init_walkers(jax.random.PRNGKey(1), molecule, n * k)
    return w.reshape(n, k * molecule.n_electrons, 3)


def steps(args, molecule) -> dict[int, float]:
    print(
        f"## Training step: {args.system}, FermiNet defaults, {args.walkers} walkers, "
        f"{args.optimizer}\n"
    )
    print(
        "| K | states' network | median step (s) | compile (s) | vs one ground-state step "
        "| vs K ground-state steps |"
    )
    print("|---|---|---|---|---|---|")
    mesh = parallel.make_mesh(1)
    built = {}
    one = args.networks[0]  # one state has one network either way
    for k, network in [(k, n) for k in args.states for n in args.networks if k > 1 or n == one]:
        config = Config(
            system=args.system,
            states=k,
            walkers=args.walkers,
            optimizer=args.optimizer,
            states_network=network,
        )
        eigenstates = registry.eigenstates(config)
        net = registry.ansatz(molecule, config)
        energy = eigenstates.local_energy(hamiltonian.for_config(molecule, config), net)
        optimizer = registry.optimizer(config)
        sampler = registry.sampler(config, molecule)
        template = abstract_train_state(net, optimizer, args.walkers, net.n_electrons, mesh)
        params = net.init(jax.random.PRNGKey(0), jnp.float32)
        state = train_state(net, optimizer, params, _walkers(molecule, k, args.walkers),
                            jax.random.PRNGKey(2), mesh=mesh)  # fmt: skip
        step = make_step(net.log_abs, energy, optimizer, step_config(config), mesh, template,
                         sampler, eigenstates.estimators())  # fmt: skip
        t0 = time.perf_counter()
        step = step.lower(template).compile()
        compile_s = time.perf_counter() - t0
        state, _ = step(state)
        built[k, network] = [step, state, compile_s, []]
    for _ in range(args.steps):  # one step of each in turn: load from other work hits all alike
        for entry in built.values():
            step, state = entry[0], entry[1]
            t0 = time.perf_counter()
            state, metrics = step(state)
            jax.block_until_ready(metrics)
            entry[3].append(time.perf_counter() - t0)
            entry[1] = state
    times = {key: statistics.median(entry[3]) for key, entry in built.items()}
    ground = times.get((1, args.networks[0]), float("nan"))
    for (k, network), median in times.items():
        one = median / ground
        label = network if k > 1 else "(one state)"
        print(f"| {k} | {label} | {median:.3f} | {built[k, network][2]:.1f} | {one:.2f}x | "
              f"{one / k:.2f}x |")  # fmt: skip
    return times


def local_energies(args, molecule) -> None:
    print(f"\n## Total local energy of K states: {args.system}, {args.walkers} walkers\n")
    print("| K | per state (energy matrix), ms | whole determinant (trace only), ms | ratio |")
    print("|---|---|---|---|")
    for k in args.states:
        if k > 1:
            per_state, whole = _two_ways(molecule, k, args.system)
            params = registry.ansatz(molecule, Config(system=args.system, states=k)).init(
                jax.random.PRNGKey(0), jnp.float32
            )
            walkers = _walkers(molecule, k, args.walkers)
            a = jax.jit(lambda p, w, f=per_state: map_walkers(f, p, w))
            b = jax.jit(lambda p, w, f=whole: map_walkers(f, p, w))
            x, y = np.asarray(a(params, walkers)), np.asarray(b(params, walkers))
            agree = np.median(np.abs(x - y) / np.abs(y))  # float32; walkers near nodes differ
            assert agree < 1e-4, f"the two ways disagree: median relative difference {agree:.2g}"
            ta = _median_seconds(lambda a=a, p=params, w=walkers: a(p, w), args.repeats)
            tb = _median_seconds(lambda b=b, p=params, w=walkers: b(p, w), args.repeats)
            print(f"| {k} | {1e3 * ta:.1f} | {1e3 * tb:.1f} | {tb / ta:.2f}x |")


def _two_ways(molecule, k: int, name: str):
    """The trace of the energy matrix (psijax's) and the local energy of the determinant
    over all K copies: Laplacian over K * N electrons, Coulomb summed over the copies."""
    config = Config(system=name, states=k)
    net = registry.ansatz(molecule, config)
    ham = hamiltonian.for_config(molecule, config)
    whole = hamiltonian.Hamiltonian(ham.terms, laplacian.Forward())

    def trace_whole(p, r):
        w = whole.walker(net, p, r)
        kinetic = -0.5 * (w.lap + jnp.sum(w.grad**2))
        potential = sum(sum(hamiltonian.coulomb_parts(molecule, x)) for x in net.copies(r))
        return kinetic + potential

    return registry.eigenstates(config).local_energy(ham, net), trace_whole


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--system", default="LiH")
    parser.add_argument("--states", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--walkers", type=int, default=256)
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--step-only", action="store_true", help="part 1 only (large K)")
    parser.add_argument("--optimizer", default="spring", help="the step's optimiser")
    parser.add_argument(
        "--networks",
        nargs="+",
        default=["shared", "separate"],
        help="how K states are built (config states_network)",
    )
    args = parser.parse_args()
    machine = platform.processor() or platform.machine()
    print(f"psijax {psijax.__version__}, jax {jax.__version__}, {machine}, "
          f"{jax.device_count()} {jax.default_backend()} device(s)\n")  # fmt: skip
    molecule = system.resolve(args.system)
    steps(args, molecule)
    if not args.step_only:
        local_energies(args, molecule)


if __name__ == "__main__":
    psijax.configure()  # the process-wide set-up psijax's own jobs do
    main()
