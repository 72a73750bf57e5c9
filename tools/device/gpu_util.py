"""Samples the GPU's utilization beside a run, on the step trace's clock, until a file appears or SIGTERM.

`python3 tools/device/gpu_util.py OUT.csv [STOP_FILE] [--every S]` writes one line per sample:
`monotonic_s,gpu,utilization_pct,memory_used_mib` (time.monotonic(), one clock for every process of the machine,
as in ADALN_BENCH_STEP_TRACE), from `nvidia-smi --query-gpu`. utilization is the share of the sample period in
which some kernel ran: with the trace, `run_time.py --util OUT.csv` says how busy the GPU was while only shared
steps ran (busy: the GPU's own work bounds them; idle: the processes' turns or the host do). Beside each GPU
line, one of the host: `monotonic_s,host,cpu_busy_pct,procs_running` from /proc/stat (the share of every core's
time since the previous sample that was not idle, and the threads runnable at the sample), which tells a host
that is saturated, or oversubscribed (more runnable threads than cores), from one that waits on the GPU.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

QUERY = ["nvidia-smi", "--query-gpu=index,utilization.gpu,memory.used", "--format=csv,noheader,nounits"]


def sample_lines(now: float, text: str) -> list[str]:
    """nvidia-smi's lines, each `index, util, memory`, as CSV lines stamped `now`; lines it could not read left out."""
    out = []
    for line in text.splitlines():
        fields = [f.strip() for f in line.split(",")]
        if len(fields) == 3 and all(f.isdigit() for f in fields):
            out.append(f"{now:.3f},{fields[0]},{fields[1]},{fields[2]}")
    return out


def cpu_times(stat_text: str) -> tuple[int, int, int]:
    """(busy jiffies, all jiffies, runnable threads) from /proc/stat's text; idle and iowait are not busy."""
    busy = total = running = 0
    for line in stat_text.splitlines():
        fields = line.split()
        if fields and fields[0] == "cpu":
            ticks = [int(x) for x in fields[1:]]
            total = sum(ticks[:8])  # user … steal; guest time is already inside user
            busy = total - ticks[3] - (ticks[4] if len(ticks) > 4 else 0)
        elif fields and fields[0] == "procs_running":
            running = int(fields[1])
    return busy, total, running


def host_line(now: float, before: tuple[int, int, int], after: tuple[int, int, int]) -> str:
    """The host's line for the period between two cpu_times readings."""
    span = after[1] - before[1]
    pct = 100.0 * (after[0] - before[0]) / span if span > 0 else 0.0
    return f"{now:.3f},host,{pct:.0f},{after[2]}"


def _read_stat() -> tuple[int, int, int] | None:
    try:
        with open("/proc/stat", encoding="ascii") as f:
            return cpu_times(f.read())
    except (OSError, ValueError):
        return None  # not Linux: GPU lines only


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0 if argv else 2
    every = 1.0
    if "--every" in argv:
        i = argv.index("--every")
        every = float(argv[i + 1])
        argv = argv[:i] + argv[i + 2:]
    path, stop = argv[0], (argv[1] if len(argv) > 1 else None)
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    last = _read_stat()
    with open(path, "a", encoding="utf-8") as f:
        while not stopping and not (stop and os.path.exists(stop)):
            now = time.monotonic()
            try:
                text = subprocess.run(QUERY, capture_output=True, text=True, timeout=10).stdout
            except (OSError, subprocess.TimeoutExpired):
                text = ""
            lines = sample_lines(now, text)
            stat = _read_stat()
            if stat is not None and last is not None:
                lines.append(host_line(now, last, stat))
            last = stat
            for line in lines:
                f.write(line + "\n")
            f.flush()
            time.sleep(max(0.0, every - (time.monotonic() - now)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
