"""Samples the GPU's utilization beside a run, on the step trace's clock, until a file appears or SIGTERM.

`python3 tools/device/gpu_util.py OUT.csv [STOP_FILE] [--every S]` writes one line per sample:
`monotonic_s,gpu,utilization_pct,memory_used_mib` (time.monotonic(), one clock for every process of the machine,
as in ADALN_BENCH_STEP_TRACE), from `nvidia-smi --query-gpu`. utilization is the share of the sample period in
which some kernel ran: with the trace, `run_time.py --util OUT.csv` says how busy the GPU was while only shared
steps ran (busy: the GPU's own work bounds them; idle: the processes' turns or the host do).
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
    with open(path, "a", encoding="utf-8") as f:
        while not stopping and not (stop and os.path.exists(stop)):
            now = time.monotonic()
            try:
                text = subprocess.run(QUERY, capture_output=True, text=True, timeout=10).stdout
            except (OSError, subprocess.TimeoutExpired):
                text = ""
            for line in sample_lines(now, text):
                f.write(line + "\n")
            f.flush()
            time.sleep(max(0.0, every - (time.monotonic() - now)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
