"""When this process was started: the zero of the peer drivers' launch timelines."""

import os
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
