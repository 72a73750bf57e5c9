"""Operators shared out at run time among the children of one mode (a CPU run's `plain.0`, `plain.1`).

Dealt in advance, the parts finished minutes apart: an operator's cost on a CPU depends on its autograd graph
and on how the CPU does bf16 GEMMs, which no declared cost predicts. So every part gets the same list,
heaviest first by declared cost, and measures the operators it claims first: a claim is a file created
exclusively in a folder of the mode's, holding the part's name. A part that dies leaves the rest of the list
to the others.

Afterwards each operator's report takes the part that claimed it (`answering`); an operator that no part
reached is reported with the status of the part that stopped, and why.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Callable, Optional, Sequence

CLAIMS_SUFFIX = ".claims"


def claim(folder: str, op: str, claimant: str) -> bool:
    """True when this part is the first to claim `op` (and now owns it)."""
    try:
        fd = os.open(Path(folder) / op, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        return False
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(claimant)
    return True


def is_claimed(folder: str | Path, op: str) -> bool:
    """True when some part has claimed `op`."""
    return (Path(folder) / op).exists()


def claimed_by(folder: Path, claimant: str) -> frozenset[str]:
    """The operators `claimant` claimed."""
    out = set()
    for path in folder.glob("*"):
        try:
            if path.read_text(encoding="utf-8") == claimant:
                out.add(path.name)
        except OSError:
            continue
    return frozenset(out)


def answering(op: str, jobs: Sequence, outcomes: dict, not_reached: Callable) -> Optional[object]:
    """The outcome that answers for `op` among one mode's jobs: the part that claimed it; else one that answers
    for its whole list (never shared, or it stopped before claiming: unavailable, not started, crashed before
    the switch); else `not_reached(job, op, outcome)` of the first part that had it. None: no job had it."""
    having = [job for job in jobs if any(w.op == op for w in job.work)]
    for job in having:
        ops = outcomes[job.key].ops
        if ops is not None and op in ops:
            return outcomes[job.key]
    for job in having:
        if outcomes[job.key].ops is None:
            return outcomes[job.key]
    if having:
        return not_reached(having[0], op, outcomes[having[0].key])
    return None
