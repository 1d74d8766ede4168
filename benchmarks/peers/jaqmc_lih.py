"""Peer benchmark: ByteDance JaQMC's own MoleculeTrainWorkflow on LiH, timed per step.

    /tmp/peers/venv-jaqmc/bin/python benchmarks/peers/jaqmc_lih.py --iterations 400
    /tmp/peers/venv-jaqmc/bin/python benchmarks/peers/peer_times.py /tmp/peers/out-jaqmc/lih

Never a psijax dependency: it runs in the peer's own venv (docs/benchmarks.md, "The step
against FermiNet and jaqmc").

This is what `jaqmc molecule train ...` does (ConfigManager + configure_runtime +
MoleculeTrainWorkflow(cfg)()), with these settings (psijax's defaults where JaQMC lets us set
them): Li (0,0,0), H (3.015,0,0) bohr, 2 up + 2 down electrons (s_z=0), 256 walkers, FermiNet
with 3 layers of (64 single, 16 double) features, 16 determinants (--determinants),
full_det, float32, 10 MCMC
moves per step, 200 Hartree-Fock pretraining steps (UHF/sto-6g) and 50 burn-in steps after
pretraining by default (none before it, as in FermiNet; psijax's defaults until
2026-11-26, benchmarks/peers/run.py passes its current 50 and 10), KFAC (JaQMC's default
optimizer and hyperparameters), JaQMC's default kinetic energy (its sparse forward Laplacian).

Nothing in JaQMC is changed. Timing is added from the outside only (monkeypatched wrappers):
- Writers.write: waits for the step's stats (block_until_ready; JaQMC's console writer would
  sync on .item() right after anyway), then adds `seconds` (since this process was exec'd) to
  the stats, so train_stats.csv gets a `seconds` column.
- MolecularSCF.run, WorkStage.run, SamplingWorkStage.burn_in are wrapped to time them
  (timing.json in the run directory).
"""

import time

_T_SCRIPT = time.time()  # before any heavy import

import argparse  # noqa: E402
import sys  # noqa: E402

from _clock import fresh_run_dir, process_start_wall, write_timing  # noqa: E402

_T_PROCESS = process_start_wall(_T_SCRIPT)

parser = argparse.ArgumentParser(
    description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
)
parser.add_argument("--iterations", type=int, default=400, help="training steps (default 400)")
parser.add_argument("--pretrain-iterations", type=int, default=200)
parser.add_argument("--burn-in", type=int, default=50, help="MCMC burn-in after pretraining")
parser.add_argument(
    "--pretrain-burn-in",
    type=int,
    default=0,
    help="MCMC burn-in before pretraining (JaQMC's default is 100)",
)
parser.add_argument("--batch-size", type=int, default=256)
parser.add_argument("--mcmc-steps", type=int, default=10)
parser.add_argument(
    "--determinants", type=int, default=16, help="psijax's default (8 before 2026-11-25)"
)
parser.add_argument("--basis", default="sto-6g", help="pretraining Hartree-Fock basis")
parser.add_argument(
    "--kinetic-mode",
    default=None,
    help="estimators.energy.kinetic.mode: forward_laplacian (JaQMC's default), scan or fori_loop",
)
parser.add_argument(
    "--out",
    default="/tmp/peers/out-jaqmc/lih",
    help="run directory; a previous run of this driver there (train_stats.csv) is removed first "
    "(JaQMC would otherwise resume from a checkpoint found there)",
)
parser.add_argument("--seed", type=int, default=None)
parser.add_argument("extra", nargs="*", help="further JaQMC dotlist overrides (key=value)")
args = parser.parse_args()

import jax  # noqa: E402
from jaqmc.app.molecule import MoleculeTrainWorkflow  # noqa: E402
from jaqmc.utils.atomic import MolecularSCF  # noqa: E402
from jaqmc.utils.config import ConfigManager  # noqa: E402
from jaqmc.utils.runtime import configure_runtime  # noqa: E402
from jaqmc.workflow.stage.base import WorkStage  # noqa: E402
from jaqmc.workflow.stage.sampling import SamplingWorkStage  # noqa: E402
from jaqmc.writer.base import Writers  # noqa: E402

_T_IMPORTED = time.time()
events = {"process_start": _T_PROCESS, "script_start": _T_SCRIPT, "imports_done": _T_IMPORTED}


def _wrap(cls, name, label):
    original = getattr(cls, name)

    def wrapper(self, *a, **kw):
        tag = label(self)
        events[tag + "_start"] = time.time()
        out = (
            jax.block_until_ready(original(self, *a, **kw))
            if tag != "hartree_fock"
            else (original(self, *a, **kw))
        )
        events[tag + "_end"] = time.time()
        return out

    setattr(cls, name, wrapper)


_wrap(MolecularSCF, "run", lambda self: "hartree_fock")
_wrap(WorkStage, "run", lambda self: f"{self.name}_stage")
_wrap(SamplingWorkStage, "burn_in", lambda self: f"{self.name}_burn_in")

_writers_open = Writers.open
_writers_write = Writers.write


def _open(self, working_dir, stage_name, **kw):
    self._timing_stage = stage_name
    return _writers_open(self, working_dir, stage_name, **kw)


def _write(self, step, stats):
    stats = jax.block_until_ready(stats)
    now = time.time()
    stage = getattr(self, "_timing_stage", "?")
    if stage == "train" and "first_step_end" not in events:
        events["first_step_end"] = now
    return _writers_write(self, step, {**stats, "seconds": round(now - _T_PROCESS, 4)})


Writers.open = _open
Writers.write = _write


def make_config(out):
    train_run = {"iterations": args.iterations, "burn_in": args.burn_in}
    cfg = {
        "workflow": {"batch_size": args.batch_size, "save_path": out, "seed": args.seed},
        "system": {
            "unit": "bohr",
            "s_z": 0.0,
            "atoms": [
                {"symbol": "Li", "coords": [0.0, 0.0, 0.0]},
                {"symbol": "H", "coords": [3.015, 0.0, 0.0]},
            ],
        },
        "wf": {
            "ndets": args.determinants,
            "hidden_dims_single": [64, 64, 64],
            "hidden_dims_double": [16, 16, 16],
            "full_det": True,
        },
        "sampler": {"steps": args.mcmc_steps},
        "pretrain": {
            "reference": {"basis": args.basis, "method": "UHF"},
            "run": {"iterations": args.pretrain_iterations, "burn_in": args.pretrain_burn_in},
        },
        "train": {"run": train_run},
    }
    if args.kinetic_mode:
        cfg["estimators"] = {"energy": {"kinetic": {"mode": args.kinetic_mode}}}
    if args.seed is None:
        del cfg["workflow"]["seed"]
    return cfg


def main():
    out = fresh_run_dir(args.out)
    cfg = ConfigManager([make_config(out)], list(args.extra))
    configure_runtime(cfg)
    events["workflow_start"] = time.time()
    MoleculeTrainWorkflow(cfg)()
    events["train_end"] = time.time()
    write_timing(
        out, events, _T_PROCESS, argv=sys.argv, jax=jax.__version__,
        devices=[str(d) for d in jax.devices()],
    )  # fmt: skip


if __name__ == "__main__":
    main()
