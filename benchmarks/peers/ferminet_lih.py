"""Peer benchmark: DeepMind FermiNet's own train.train(cfg) on LiH (or N2), timed per step.

    /tmp/peers/venv-ferminet/bin/python benchmarks/peers/ferminet_lih.py --iterations 400
    /tmp/peers/venv-ferminet/bin/python benchmarks/peers/ferminet_lih.py --system N2 \
        --iterations 100 --out /tmp/peers/out-ferminet/n2
    /tmp/peers/venv-ferminet/bin/python benchmarks/peers/peer_times.py /tmp/peers/out-ferminet/lih

Never a psijax dependency: it runs in the peer's own venv (docs/benchmarks.md, "The step
against FermiNet and jaqmc").

Settings (psijax's defaults where FermiNet lets us set them): Li (0,0,0), H (3.015,0,0) bohr,
2 up + 2 down electrons, 256 walkers, FermiNet hidden_dims 3 x (64, 16) (--hidden-dims),
16 determinants (--determinants), full_det, float32, 10 MCMC moves per step, 200
Hartree-Fock pretraining steps (UHF/sto-6g) and 50 burn-in steps by default (psijax's
defaults until 2026-11-26; benchmarks/peers/run.py passes its current 50 and 10), KFAC
(FermiNet's default optimizer and hyperparameters), FermiNet's default
Laplacian (--laplacian folx for its forward-Laplacian option).

Nothing in FermiNet is changed. Timing is added from the outside only:
- train.train() is given a writer (a subclass of FermiNet's own CSV writer) that adds to every
  row of train_stats.csv `seconds` (since this process was exec'd, from /proc) and `wall`
  (time.time()). FermiNet's loop syncs with the device every step (pmove .item() and
  np.asarray(loss) before the write), so consecutive `seconds` differ by one step's wall time.
- ferminet.pretrain.get_hf / pretrain_hartree_fock are wrapped to time them; entering the
  writer marks the end of burn-in + initial-energy evaluation (the loop starts right after).
These go to timing.json in the run directory.
"""

import time

_T_SCRIPT = time.time()  # before any heavy import

import argparse  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402

from _clock import fresh_run_dir, process_start_wall, write_timing  # noqa: E402

_T_PROCESS = process_start_wall(_T_SCRIPT)

# psijax's presets and the scale benchmark's molecules (benchmarks/molecule_scale.py):
# (symbol, (x, y, z) in bohr) per atom, (up, down) electrons
MOLECULES = {
    "LiH": ((("Li", (0.0, 0.0, 0.0)), ("H", (3.015, 0.0, 0.0))), (2, 2)),
    "N2": ((("N", (0.0, 0.0, 0.0)), ("N", (2.068, 0.0, 0.0))), (7, 7)),
}
parser = argparse.ArgumentParser(
    description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
)
parser.add_argument("--iterations", type=int, default=400, help="training steps (default 400)")
parser.add_argument(
    "--system", default="LiH",
    help="LiH (the default) or N2 at psijax's preset geometry, or a JSON file "
    '{"atoms": [[symbol, [x, y, z]], ...], "electrons": [up, down]} in bohr',
)  # fmt: skip
parser.add_argument(
    "--hidden-dims", default="64,16x3",
    help="FermiNet hidden_dims as single,pair x depth (psijax's default 64,16x3)",
)  # fmt: skip
parser.add_argument("--pretrain-iterations", type=int, default=200)
parser.add_argument("--burn-in", type=int, default=50)
parser.add_argument("--batch-size", type=int, default=256)
parser.add_argument("--mcmc-steps", type=int, default=10)
parser.add_argument(
    "--determinants", type=int, default=16, help="psijax's default (8 before 2026-11-25)"
)
parser.add_argument("--basis", default="sto-6g", help="pretraining Hartree-Fock basis")
parser.add_argument(
    "--scf-fraction",
    type=float,
    default=None,
    help="FermiNet pretraining: fraction of HF in the sampled density "
    "(FermiNet's default 1.0 samples HF |psi|^2; 0.0 samples the network)",
)
parser.add_argument(
    "--laplacian",
    default="default",
    help="FermiNet optim.laplacian: 'default' (FermiNet's default: jvp of grad, "
    "a loop over the 12 coordinates) or 'folx' (Microsoft's forward Laplacian)",
)
parser.add_argument("--optimizer", default="kfac", help="FermiNet optim.optimizer (kfac|adam|lamb)")
parser.add_argument(
    "--out",
    default="/tmp/peers/out-ferminet/lih",
    help="run directory; a previous run of this driver there (train_stats.csv) is removed first "
    "(FermiNet would otherwise resume from a checkpoint found there)",
)
parser.add_argument(
    "--seed",
    type=int,
    default=None,
    help="if given, FermiNet's debug.deterministic (seed 23) is switched on",
)
args = parser.parse_args()

import jax  # noqa: E402
from absl import logging  # noqa: E402
from ferminet import base_config, pretrain, train  # noqa: E402
from ferminet.utils import system, writers  # noqa: E402

_T_IMPORTED = time.time()
logging.set_verbosity(logging.INFO)
logging.use_absl_handler()

events = {
    "process_start": _T_PROCESS,
    "script_start": _T_SCRIPT,
    "imports_done": _T_IMPORTED,
}


def _timed(name, fn):
    def wrapper(*a, **kw):
        t = time.time()
        out = fn(*a, **kw)
        out = jax.block_until_ready(out) if name != "hartree_fock" else out
        events[name + "_start"], events[name + "_end"] = t, time.time()
        return out

    return wrapper


pretrain.get_hf = _timed("hartree_fock", pretrain.get_hf)
pretrain.pretrain_hartree_fock = _timed("pretrain", pretrain.pretrain_hartree_fock)


class TimedWriter(writers.Writer):
    """FermiNet's CSV writer plus `seconds` since process start and `wall` per row."""

    def __init__(self, directory):
        schema = ["step", "energy", "ewmean", "ewvar", "pmove", "seconds", "wall"]
        super().__init__(
            name="train_stats", schema=schema, directory=directory, iteration_key=None, log=False
        )

    def __enter__(self):
        events["loop_enter"] = time.time()  # after pretraining, burn-in, initial energy
        return super().__enter__()

    def write(self, t, **data):
        now = time.time()
        if "first_step_end" not in events:
            events["first_step_end"] = now
        super().write(t, seconds=f"{now - _T_PROCESS:.4f}", wall=f"{now:.4f}", **data)
        self._file.flush()


def make_config():
    cfg = base_config.default()
    if args.system in MOLECULES:
        atoms, electrons = MOLECULES[args.system]
    else:
        with open(args.system) as f:
            spec = json.load(f)
        atoms, electrons = spec["atoms"], tuple(spec["electrons"])
    cfg.system.molecule = [
        system.Atom(symbol=symbol, coords=tuple(xyz), units="bohr") for symbol, xyz in atoms
    ]
    cfg.system.electrons = electrons
    cfg.batch_size = args.batch_size
    cfg.network.network_type = "ferminet"
    width, depth = args.hidden_dims.split("x")
    cfg.network.ferminet.hidden_dims = (tuple(int(w) for w in width.split(",")),) * int(depth)
    cfg.network.determinants = args.determinants
    cfg.network.full_det = True
    cfg.mcmc.steps = args.mcmc_steps
    cfg.mcmc.burn_in = args.burn_in
    cfg.pretrain.method = "hf"
    cfg.pretrain.iterations = args.pretrain_iterations
    cfg.pretrain.basis = args.basis
    if args.scf_fraction is not None:
        cfg.pretrain.scf_fraction = args.scf_fraction
    cfg.optim.optimizer = args.optimizer
    cfg.optim.laplacian = args.laplacian
    cfg.optim.iterations = args.iterations
    cfg.log.save_path = args.out
    if args.seed is not None:
        cfg.debug.deterministic = True
    return base_config.resolve(cfg)


def main():
    out = fresh_run_dir(args.out)
    cfg = make_config()
    events["train_called"] = time.time()
    train.train(cfg, writer_manager=TimedWriter(out))
    events["train_end"] = time.time()
    write_timing(
        out, events, _T_PROCESS, argv=sys.argv, jax=jax.__version__,
        devices=[str(d) for d in jax.devices()], config=cfg.to_json_best_effort(indent=1),
    )  # fmt: skip


if __name__ == "__main__":
    main()
