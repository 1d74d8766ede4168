"""When this process was started (the zero of the peer drivers' launch timelines), and the
run directory and timing.json every driver writes. Standard library only: each driver runs
in its own code's venv."""

import json
import os
import shutil
import sys
import time


def process_start_wall(fallback: float) -> float:
    """Wall-clock time at which this process was exec'd (Linux /proc, 10 ms resolution)."""
    try:
        with open("/proc/self/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        start_ticks = int(fields[19])  # field 22 (starttime), counted after "pid (comm)"
        with open("/proc/stat") as f:
            btime = next(int(line.split()[1]) for line in f if line.startswith("btime"))
        return btime + start_ticks / os.sysconf("SC_CLK_TCK")
    except Exception:  # pragma: no cover - non-Linux
        return fallback if fallback else time.time()


def fresh_run_dir(out: str) -> str:
    """``out`` made absolute and empty: an earlier run of a driver there (train_stats.csv) is
    removed first; any other non-empty directory is refused."""
    out = os.path.abspath(out)
    if os.path.exists(out):
        if os.listdir(out) and not os.path.exists(os.path.join(out, "train_stats.csv")):
            sys.exit(
                f"{out} is not empty and holds no earlier run of this driver: refusing to wipe it"
            )
        shutil.rmtree(out)
    os.makedirs(out)
    return out


def write_timing(out: str, events: dict, process_start: float, **info) -> None:
    """timing.json in ``out``: ``events`` (wall times) as seconds since ``process_start``,
    in time order, with ``info``; then the launch (exec to the first training step) printed."""
    since = {k: round(v - process_start, 4) for k, v in sorted(events.items(), key=lambda e: e[1])}
    with open(os.path.join(out, "timing.json"), "w") as f:
        json.dump({"events_since_process_start": since, **info}, f, indent=1)
    print(
        f"launch (process exec) to first training step finished: {since['first_step_end']:.2f} s",
        flush=True,
    )
    print(f"run directory: {out}", flush=True)
