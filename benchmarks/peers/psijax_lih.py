"""psijax's side of the peer benchmark: ``psijax.train`` on LiH, timed from the process's exec.

    python benchmarks/peers/psijax_lih.py --iterations 400 [--out /tmp/peers/out-psijax/lih]
    python3 benchmarks/peers/peer_times.py /tmp/peers/out-psijax/lih

The same run as ``psijax train --steps N --out RUN --quiet --compilation-cache FRESH`` (the
defaults: LiH, 256 walkers, 3 x (64, 16), 16 determinants, SPRING), with the clock the peer
drivers use: psijax's metrics.csv counts ``seconds`` from ``train()``'s first line, after
Python, JAX and psijax were imported; this driver writes train_stats.csv with ``seconds``
since the process was exec'd (``_clock.process_start_wall``) and timing.json with the
launch's events, so that ``peer_times.py`` reads all three codes alike. The compilation
cache is a fresh empty directory (removed afterwards), as the peers start with none.
"""

import time

_T_SCRIPT = time.time()  # before any heavy import

import argparse  # noqa: E402
import csv  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import shutil  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402

from _clock import fresh_run_dir, process_start_wall, write_timing  # noqa: E402

_T_PROCESS = process_start_wall(_T_SCRIPT)

parser = argparse.ArgumentParser(
    description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
)
parser.add_argument("--iterations", type=int, default=400, help="training steps (default 400)")
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--out", default="/tmp/peers/out-psijax/lih", help="run directory (replaced)")
parser.add_argument("extra", nargs="*", help="more psijax config keys as KEY=VALUE")
args = parser.parse_args()

import jax  # noqa: E402

import psijax  # noqa: E402

_T_IMPORTED = time.time()


def _value(text: str):
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def main():
    out = fresh_run_dir(args.out)
    extra = dict(item.split("=", 1) for item in args.extra)
    cache = tempfile.mkdtemp(prefix="psijax-peers-cache-")
    events = {"process_start": _T_PROCESS, "script_start": _T_SCRIPT, "imports_done": _T_IMPORTED}
    try:
        events["train_called"] = time.time()
        psijax.train(
            system="LiH",
            steps=args.iterations,
            seed=args.seed,
            out=os.path.join(out, "psijax"),
            compilation_cache=cache,
            progress=False,
            **{k: _value(v) for k, v in extra.items()},
        )
        events["train_end"] = time.time()
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    # metrics.csv's seconds count from train()'s first line, i.e. from events["train_called"]
    offset = events["train_called"] - _T_PROCESS
    with open(os.path.join(out, "psijax", "metrics.csv")) as f:
        rows = list(csv.DictReader(f))
    with open(os.path.join(out, "train_stats.csv"), "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["step", "energy", "variance", "seconds"])
        for r in rows:
            seconds = float(r["seconds"]) + offset
            writer.writerow([r["step"], r["energy"], r["variance"], f"{seconds:.4f}"])
    events["first_step_end"] = _T_PROCESS + float(rows[0]["seconds"]) + offset
    write_timing(
        out, events, _T_PROCESS, argv=sys.argv, jax=jax.__version__, psijax=psijax.__version__,
        devices=[str(d) for d in jax.devices()],
    )  # fmt: skip


if __name__ == "__main__":
    main()
