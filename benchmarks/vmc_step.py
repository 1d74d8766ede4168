"""Time the default VMC job: launch breakdown, compile, steady-state step and its parts.

    python benchmarks/vmc_step.py [--system LiH] [--steps 30] [--pretrain-steps 200]
                                  [--parts] [--laplacian default]

Builds the job the way ``psijax.training.job.train`` does (defaults of ``psijax.config.Config``:
256 walkers, FermiNet 3 x (64, 16), 16 determinants, 10 MCMC moves per step, SPRING,
Hartree-Fock pretraining, 50 burn-in steps, float32) and prints one table:

- launch breakdown: imports, Hartree-Fock, pretraining (compile included), burn-in
  (compile included), compile + first training step;
- steady-state step time: median over ``--steps`` steps after two warm-up steps;
- with ``--parts``: the same pieces timed in isolation (MCMC moves, local energies,
  loss gradient, per-walker jacobian, SPRING update), each its own jitted function.

Run it twice with PYTHONPATH pointing at two checkouts for an A/B comparison; the
load average is printed so that numbers taken on a shared machine can be judged.
"""

from __future__ import annotations

import time

_T0 = time.perf_counter()

import argparse  # noqa: E402
import dataclasses  # noqa: E402
import os  # noqa: E402
import platform  # noqa: E402
import statistics  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import psijax  # noqa: E402
from psijax import config as config_lib  # noqa: E402
from psijax import hamiltonian, parallel, registry, sampling, system  # noqa: E402
from psijax.optim.gradient import make_energy_loss  # noqa: E402
from psijax.parallel.batching import map_walkers  # noqa: E402
from psijax.sampling import burn_in  # noqa: E402
from psijax.system import scf, sizing  # noqa: E402
from psijax.training import pretrain  # noqa: E402
from psijax.training.state import train_state  # noqa: E402
from psijax.training.step import StepConfig, make_step  # noqa: E402

_IMPORT_S = time.perf_counter() - _T0

step_fn_cache: dict = {}


def _block(tree):
    return jax.block_until_ready(tree)


def _timed(fn, *args, repeats: int = 5):
    """(first-call seconds, median of `repeats` later calls) of a jitted function."""
    t = time.perf_counter()
    _block(fn(*args))
    first = time.perf_counter() - t
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        _block(fn(*args))
        times.append(time.perf_counter() - t)
    return first, statistics.median(times)


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--system", default="LiH")
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--pretrain-steps", type=int, default=None)
    parser.add_argument("--burn-in-steps", type=int, default=None)
    parser.add_argument("--laplacian", default="default")
    parser.add_argument("--parts", action="store_true", help="time the pieces of a step")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--jacobian-blocks", type=int, default=1)
    parser.add_argument(
        "--against",
        metavar="DIR",
        help="a checkout (e.g. a git worktree of main) whose step is timed in the same process, "
        "interleaved step by step with this one, so that load from other jobs hits both alike",
    )
    args = parser.parse_args()

    overrides = dict(
        system=args.system, laplacian=args.laplacian, seed=args.seed,
        jacobian_blocks=args.jacobian_blocks,
    )  # fmt: skip
    if args.pretrain_steps is not None:
        overrides["pretrain_steps"] = args.pretrain_steps
    if args.burn_in_steps is not None:
        overrides["burn_in_steps"] = args.burn_in_steps
    config = config_lib.from_dict(overrides)
    config = sizing.for_system(config)  # walkers by the molecule, as a run
    load_start = os.getloadavg()
    rows: list[tuple[str, str]] = []

    t = time.perf_counter()
    molecule = system.resolve(
        config.system, charge=config.charge, spin=config.spin, unit=config.unit
    )
    mesh = parallel.make_mesh(config.devices)
    net = registry.ansatz(molecule, config)
    keys = jax.random.split(jax.random.PRNGKey(config.seed), 5)
    params = jax.device_put(net.init(keys[0], jnp.float32), parallel.replicated(mesh))
    walkers = sampling.init_walkers(keys[1], molecule, config.walkers)
    walkers = _block(jax.device_put(walkers, parallel.walker_sharding(mesh)))
    setup_s = time.perf_counter() - t

    t = time.perf_counter()
    hf = scf.hartree_fock(molecule, config.basis)
    hf_s = time.perf_counter() - t

    pre_s = 0.0
    if config.pretrain_steps:
        t = time.perf_counter()
        params, walkers, losses = pretrain.pretrain(
            keys[2], net, params, molecule, walkers,
            steps=config.pretrain_steps, basis=config.basis, hf=hf,
            sampler=pretrain.sampler_of(config, molecule),
        )  # fmt: skip
        _block((params, walkers))
        pre_s = time.perf_counter() - t
        rows.append(("pretraining loss first / last", f"{losses[0]:.4f} / {losses[-1]:.4f}"))

    sampler = registry.sampler(config, molecule)
    width = sampler.init(jnp.float32)
    t = time.perf_counter()
    if config.burn_in_steps:
        batch_log_abs = lambda w: map_walkers(net.log_abs, params, w)
        walkers, _, width = burn_in(
            keys[3], sampler, batch_log_abs, walkers, width, n_steps=config.burn_in_steps
        )
    log_abs = _block(map_walkers(net.log_abs, params, walkers))
    burn_s = time.perf_counter() - t

    t = time.perf_counter()
    local_energy = hamiltonian.for_config(molecule, config).local_energy(net)
    optimizer = registry.optimizer(config)
    state = train_state(
        net, optimizer, params, walkers, keys[4], sampler_state=width, log_abs=log_abs, mesh=mesh
    )
    step_config = StepConfig(
        clip_scale=config.clip_scale,
        chunk_size=config.chunk_size,
        jacobian_blocks=config.jacobian_blocks,
    )
    step = make_step(net.log_abs, local_energy, optimizer, step_config, mesh, state, sampler)
    step_fn_cache["step"] = step
    state, metrics = step(state)
    _block(metrics)
    first_s = time.perf_counter() - t
    launch_s = _IMPORT_S + setup_s + hf_s + pre_s + burn_s + first_s

    for _ in range(2):  # warm-up
        state, metrics = step(state)
    _block(metrics)
    times, cpu_times, energies = [], [], []
    for _ in range(args.steps):
        t, c = time.perf_counter(), time.process_time()
        state, metrics = step(state)
        _block(metrics)
        times.append(time.perf_counter() - t)
        cpu_times.append(time.process_time() - c)
        energies.append(float(metrics["energy"]))

    rows = [
        ("imports (python, jax, psijax)", f"{_IMPORT_S:.2f} s"),
        ("setup (mesh, init params, walkers)", f"{setup_s:.2f} s"),
        (f"Hartree-Fock (UHF/{config.basis})", f"{hf_s:.2f} s"),
        (f"pretraining ({config.pretrain_steps} steps, compile incl.)", f"{pre_s:.2f} s"),
        (f"burn-in ({config.burn_in_steps} steps, compile incl.)", f"{burn_s:.2f} s"),
        (
            "compile of the training step (first step - median step)",
            f"{first_s - statistics.median(times):.2f} s",
        ),
        ("build + compile + first training step", f"{first_s:.2f} s"),
        ("**launch to first training step**", f"**{launch_s:.2f} s**"),
        (
            f"**steady-state step, median of {args.steps}**",
            f"**{statistics.median(times):.4f} s**",
        ),
        ("step time min / max", f"{min(times):.4f} / {max(times):.4f} s"),
        # CPU seconds of all threads per step: robust to other jobs on a shared machine.
        ("step CPU time (all threads), median", f"{statistics.median(cpu_times):.4f} s"),
        ("energy after the timed steps", f"{energies[-1]:.4f} Ha"),
        *rows,
    ]

    if args.against:
        rows += _against(args.against, config, molecule, net, mesh, state, step_config, args.steps)

    if args.parts:
        rows += _parts(
            net, local_energy, optimizer, step_config, state, mcmc_moves=config.mcmc_moves
        )

    load_end = os.getloadavg()
    print(f"# VMC step benchmark: {config.system}, {time.strftime('%Y-%m-%dT%H:%M:%S')}")
    print(
        f"- python {platform.python_version()}, jax {jax.__version__}, "
        f"folx {_version('folx')}, optax {_version('optax')}, numpy {np.__version__}"
    )
    print(f"- CPU: {_cpu_name()}; {os.cpu_count()} logical cores; devices {jax.devices()}")
    print(f"- XLA_FLAGS: {os.environ.get('XLA_FLAGS', '(unset)')!r}")
    print(
        f"- load average (1/5/15 min) start: {' '.join(f'{x:.2f}' for x in load_start)}, "
        f"end: {' '.join(f'{x:.2f}' for x in load_end)}"
    )
    print(
        f"- {molecule.n_electrons} electrons, {config.walkers} walkers, layers {config.layers}, "
        f"{config.determinants} determinants, {config.mcmc_moves} moves/step, "
        f"optimizer {config.optimizer}, laplacian {_laplacian_name(local_energy)}, "
        f"HF energy {hf.energy:.4f}"
    )
    print()
    print("| quantity | value |")
    print("|---|---|")
    for name, value in rows:
        print(f"| {name} | {value} |")


def _laplacian_name(local_energy) -> str:
    return type(local_energy.hamiltonian.laplacian).__name__


def _parts(net, local_energy, optimizer, step_config, state, *, mcmc_moves):
    """Each piece of a step, jitted alone, timed on the current state."""
    params, walkers = state.params, state.walkers
    loss = make_energy_loss(net.log_abs, local_energy, clip_scale=step_config.clip_scale)

    @jax.jit
    def moves(key, params, walkers, log_abs, width):
        f = lambda w: map_walkers(net.log_abs, params, w)
        return sampling.metropolis(key, f, walkers, log_abs, width, mcmc_moves)

    @jax.jit
    def log_abs_only(params, walkers):
        return map_walkers(net.log_abs, params, walkers)

    @jax.jit
    def energies(params, walkers):
        return map_walkers(local_energy, params, walkers)

    @jax.jit
    def loss_grad(params, walkers):
        return jax.value_and_grad(loss, has_aux=True)(params, walkers)

    def flat_grad(params, r):
        return jax.flatten_util.ravel_pytree(jax.grad(net.log_abs)(params, r))[0]

    @jax.jit
    def jacobian(params, walkers):
        return map_walkers(flat_grad, params, walkers)

    jac = jacobian(params, walkers)
    e = energies(params, walkers)
    centered = e - jnp.mean(e)

    @jax.jit
    def update(opt_state, params, jac, centered):
        return optimizer.update(params, opt_state, params, jacobian=jac, centered_energies=centered)

    key = jax.random.PRNGKey(0)
    out = []
    for name, fn, fargs in [
        (f"MCMC ({mcmc_moves} moves)", moves, (key, params, walkers, state.log_abs, state.sampler)),
        ("log|psi| of all walkers (1 move's work)", log_abs_only, (params, walkers)),
        ("local energies", energies, (params, walkers)),
        ("local energies + loss gradient", loss_grad, (params, walkers)),
        ("per-walker jacobian of log|psi|", jacobian, (params, walkers)),
        ("optimizer update (SPRING solve)", update, (state.opt_state, params, jac, centered)),
    ]:
        first, median = _timed(fn, *fargs)
        out.append((f"part: {name}", f"{median:.4f} s (first call {first:.2f} s)"))
    return out


def _against(path, config, molecule, net, mesh, state, step_config, n_steps):
    """This checkout's step and ``path``'s, on the same state, alternating call by call.

    The other step is built entirely from ``path``'s modules (ansatz, Hamiltonian,
    optimizer, sampler, step), from the same parameters, walkers and optimizer state; that
    checkout must have this one's package layout.
    """
    ref = _import_copy(path)
    ref_net = ref.ansatz.FermiNet(**dataclasses.asdict(net))
    ref_config = ref.config.Config(**dataclasses.asdict(config))
    local_energy = ref.hamiltonian.for_config(molecule, ref_config).local_energy(ref_net)
    optimizer = ref.registry.optimizer(ref_config)
    opt_tree = jax.tree.structure(optimizer.init(state.params))
    ref_state = ref.types.TrainState(
        *state._replace(opt_state=jax.tree.unflatten(opt_tree, jax.tree.leaves(state.opt_state)))
    )
    ref_step = ref.step.make_step(
        ref_net.log_abs, local_energy, optimizer,
        ref.step.StepConfig(**dataclasses.asdict(step_config)), mesh, ref_state,
        _ref_sampler(ref, ref_config, molecule),
    )  # fmt: skip
    steps = {"this": step_fn_cache["step"], "against": ref_step}
    states = {"this": jax.tree.map(jnp.copy, state), "against": jax.tree.map(jnp.copy, ref_state)}
    for name, fn in steps.items():  # compile and warm up
        for _ in range(2):
            states[name], m = fn(states[name])
        _block(m)
    times = {name: [] for name in steps}
    for _ in range(n_steps):
        for name, fn in steps.items():
            t = time.perf_counter()
            states[name], m = fn(states[name])
            _block(m)
            times[name].append(time.perf_counter() - t)
    this, other = (statistics.median(times[k]) for k in ("this", "against"))
    lo_this, lo_other = (min(times[k]) for k in ("this", "against"))
    return [
        (f"interleaved: step of {path}, median / min", f"{other:.4f} / {lo_other:.4f} s"),
        ("interleaved: step of this checkout, median / min", f"{this:.4f} / {lo_this:.4f} s"),
        ("interleaved: speed-up, median / min", f"{other / this:.2f}x / {lo_other / lo_this:.2f}x"),
    ]


def _ref_sampler(ref, config, molecule):
    """The reference checkout's sampler, from a registry that takes the molecule or not."""
    import inspect

    if "molecule" in inspect.signature(ref.registry.sampler).parameters:
        return ref.registry.sampler(config, molecule)
    return ref.registry.sampler(config)  # a checkout from before the samplers took it


def _import_copy(path: str):
    """``path``/psijax imported as a separate package ``psijax_ref`` (a renamed copy)."""
    import importlib
    import re
    import shutil
    import sys
    import tempfile

    root = tempfile.mkdtemp(prefix="psijax_ref_")
    shutil.copytree(os.path.join(path, "psijax"), os.path.join(root, "psijax_ref"))
    for dirpath, _, files in os.walk(os.path.join(root, "psijax_ref")):
        for name in files:
            if name.endswith(".py"):
                file = os.path.join(dirpath, name)
                with open(file) as f:
                    text = re.sub(r"\bpsijax\b", "psijax_ref", f.read())
                with open(file, "w") as f:
                    f.write(text)
    sys.path.insert(0, root)
    pkg = importlib.import_module("psijax_ref")
    for name, module in {
        "ansatz": "ansatz", "config": "config", "hamiltonian": "hamiltonian",
        "registry": "registry", "step": "training.step", "types": "types",
    }.items():  # fmt: skip
        setattr(pkg, name, importlib.import_module(f"psijax_ref.{module}"))
    return pkg


def _version(name: str) -> str:
    try:
        from importlib.metadata import version

        return version(name)
    except Exception:
        return "?"


if __name__ == "__main__":
    psijax.configure()  # the process-wide set-up psijax's own jobs do
    main()
