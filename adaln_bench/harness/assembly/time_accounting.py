"""How a run's time was spent, for its run index: per phase and per mode, and how much had a GPU to itself.

Every child reports its steps' seconds (harness/measurement/step_clock.py). Here they are summed over a mode's children
(the parts of a split mode) and over the run. The `--repeat` children's seconds count as the phase `repeats`
(their own latency steps included there), and their exclusive seconds in `gpu_exclusive_s` with the rest.
Phase seconds are process-seconds: with work side by side they add up to more than the run's wall time,
while `gpu_exclusive_s` never overlaps on one GPU, so per GPU it is a floor under the wall time.
"""
from __future__ import annotations

from typing import Mapping, Optional, Sequence

from adaln_bench.harness.measurement.step_clock import PHASES

REPEATS = "repeats"


def _add(into: dict, key: str, seconds: Optional[float]) -> None:
    if seconds:
        into[key] = round(into.get(key, 0.0) + seconds, 3)


def _mode_of(key: str, jobs: Sequence) -> str:
    for job in jobs:
        if job.key == key:
            return job.mode.name
    return key.split(".")[0]


def run_time(jobs: Sequence, first: Mapping[str, object], repeats: Sequence[Mapping[str, object]],
             schedule: Optional[dict]) -> dict:
    """The run index's `time` record from the outcomes (`ModeOutcome`, keyed by job) of repetition 1 and of each
    later repetition; `schedule` is what harness/assembly/schedule.py decided (None on a CPU)."""
    modes: dict[str, dict] = {}
    total = {"phases_s": {}, "gpu_exclusive_s": 0.0, "waited_s": 0.0}

    def account(key: str, outcome, repeated: bool) -> None:
        mode = modes.setdefault(_mode_of(key, jobs), {"children": 0, "child_s": 0.0, "phases_s": {},
                                                       "gpu_exclusive_s": 0.0, "waited_s": 0.0,
                                                       "peak_memory_bytes": None, "peak_memory_by_op": {},
                                                       "residual_memory_by_op": {}})
        child = getattr(outcome, "child", None)
        times = child.time if child is not None else None
        wall = outcome.run.wall_s
        if wall is None and times is None:
            return  # never started: nothing was spent
        mode["children"] += 1
        mode["child_s"] = round(mode["child_s"] + (wall or 0.0), 3)
        if times is None:
            return
        for record in (mode, total):
            if repeated:
                _add(record["phases_s"], REPEATS, wall)
            else:
                for phase, seconds in times.phases_s.items():
                    _add(record["phases_s"], phase, seconds)
            record["gpu_exclusive_s"] = round(record["gpu_exclusive_s"] + times.exclusive_s, 3)
            record["waited_s"] = round(record["waited_s"] + times.waited_s, 3)
        if times.peak_memory_bytes is not None:
            mode["peak_memory_bytes"] = max(mode["peak_memory_bytes"] or 0, times.peak_memory_bytes)
        for field in ("peak_memory_by_op", "residual_memory_by_op"):
            by_op = mode[field]
            for op, nbytes in getattr(times, field).items():
                by_op[op] = max(by_op.get(op, 0), nbytes)

    for key, outcome in first.items():
        account(key, outcome, repeated=False)
    for rep in repeats:
        for key, outcome in rep.items():
            account(key, outcome, repeated=True)
    order = {p: i for i, p in enumerate((*PHASES, REPEATS))}

    def ordered(phases: dict) -> dict:
        return dict(sorted(phases.items(), key=lambda kv: order.get(kv[0], len(order))))

    for record in (total, *modes.values()):
        record["phases_s"] = ordered(record["phases_s"])
    return {"schedule": schedule, **total, "modes": modes}
