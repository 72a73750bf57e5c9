"""The free memory of the run's GPUs, before the first child starts (harness/assembly/schedule.py).

Asked of torch in a short-lived process, as the children will see the GPUs (CUDA_VISIBLE_DEVICES and the
device order included): a CUDA context made here in the parent would hold memory for the whole run.
"""
from __future__ import annotations

import json
import subprocess
import sys
from typing import Optional, Sequence

TIMEOUT_S = 120.0
_ASK = ("import json, sys, torch; ids = json.loads(sys.argv[1]); "
        "print(json.dumps([torch.cuda.mem_get_info(i)[0] for i in ids]))")


def free_bytes_of(gpus: Sequence[Optional[int]]) -> list[Optional[int]]:
    """Free bytes per GPU index (None: the first visible GPU); None for each where torch could not say."""
    ids = [0 if g is None else g for g in gpus]
    try:
        proc = subprocess.run([sys.executable, "-c", _ASK, json.dumps(ids)], capture_output=True, text=True,
                              timeout=TIMEOUT_S, stdin=subprocess.DEVNULL)
        values = json.loads(proc.stdout.strip().splitlines()[-1]) if proc.returncode == 0 else None
    except (OSError, subprocess.TimeoutExpired, ValueError, IndexError):
        values = None
    if not isinstance(values, list) or len(values) != len(ids):
        return [None] * len(ids)
    return [int(v) if isinstance(v, int) and v > 0 else None for v in values]
