"""What the parent and a mode's child process say to each other.

The parent writes a `ChildSpec` file; the child writes a `ChildResult` file (both validated on read, through
the one child protocol: harness/processes/launcher.py) and reports progress as lines on stdout that start with
`PROGRESS_PREFIX`, written by `ProgressWriter`.
"""
from __future__ import annotations

import json
import time
from typing import Literal, Optional

from pydantic import BaseModel, ConfigDict, Field

from adaln_bench.datamodel.schema import (CandidateEntry, Environment, InputFingerprint, ModeEnvironment,
                                        ModeObservation)
from adaln_bench.harness.measurement.parts import Parts
from adaln_bench.harness.processes.launcher import ProtocolSpec
from adaln_bench.harness.measurement.step_clock import StepTimes
from adaln_bench.shape import Shape

PROGRESS_PREFIX = "@@adaln-bench-progress "
# The progress event a child prints once its mode is switched on: the later parts of a mode split over several
# children start then (harness/processes/job_queue.py).
SWITCHED_ON = {"switched": "on"}


class OpWork(BaseModel):
    """One operator's candidates for one mode's child."""

    model_config = ConfigDict(extra="forbid")

    op: str
    candidates: list[str]


class RunConfig(BaseModel):
    """A run's configuration, in one place: what the parent decided from the command line, as the runner, every
    mode's child and every cold-start check of the run receive it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    device: Literal["cuda", "cpu"]
    shape: Shape
    quick: bool = False
    # Seconds one mode's child may take before the parent stops it; None: no limit.
    timeout_s: Optional[float] = None
    modes_file: Optional[str] = None
    megatron_src: Optional[str] = None
    # Only switch each mode on and report what was seen (for `adaln-bench modes`).
    check_only: bool = False
    # What to measure per candidate: the probes (with the fingerprint), the errors against FP64, the times.
    # A latency-only child (probes and accuracy off: `run --repeat K`) makes no run but the timed ones.
    parts: Parts = Parts()
    # CUDA, `run --probe-graphs`: the probes replay their runs of few rows from CUDA graphs
    # (harness/measurement/graphed_runs.py); off: every run eager.
    probe_graphs: bool = False
    # The cold-start check per candidate (with the probes only); off: the report has no cold_start entries.
    cold_start: bool = True
    # `run --draw-geometry`: "native", "h200", "b200" or an SM count (adaln_bench/draws).
    draw_geometry: str = "native"
    # How the children of one GPU share it (harness/assembly/schedule.py). `run --serial`: every step takes the
    # lease exclusive.
    serial: bool = False
    # Cold-start checks at once; they run beside the child's next candidates where the schedule planned their
    # processes and memory (`cold_start_beside`), else the child waits for each (a pool of one: one after another).
    cold_start_pool: int = Field(default=1, ge=1)
    cold_start_beside: bool = False
    # The GPU lease (harness/processes/gpu_lease.py): None on CUDA only; True also on a CPU (the tests' fake GPU).
    lease: Optional[bool] = None
    # Bytes of each GPU's memory that the run's steps may reserve at once (harness/processes/memory_ledger.py);
    # None: no ledger (a CPU run, --serial, an unknown free memory).
    memory_budget_bytes: Optional[int] = Field(default=None, ge=0)


class ChildSpec(ProtocolSpec):
    """What one mode's child is given: the run's configuration, its mode and the operators it measures."""

    model_config = ConfigDict(extra="forbid")

    config: RunConfig
    mode: str
    # Every operator the child measures in this mode, in order: torch imported and the switch on once.
    work: list[OpWork]
    # One part of a mode split over several children: every part has the same `work`, and measures only the
    # operators it claims in this folder, as `claimant` (harness/processes/claims.py).
    claims_dir: Optional[str] = None
    claimant: Optional[str] = None
    # The GPU's lease (harness/processes/gpu_lease.py): its folder and key; None: no lease (a CPU run).
    lease_dir: Optional[str] = None
    lease_key: Optional[str] = None


class ChildResult(BaseModel):
    mode: str
    status: Literal["ok", "unavailable", "running"]
    reason: Optional[str] = None
    observed: Optional[ModeObservation] = None
    environment: Optional[Environment] = None
    runtime: Optional[ModeEnvironment] = None
    # Per operator: the seeded inputs' fingerprint, and the candidates keyed by the name the report uses
    # (e.g. "diffusers[plain]").
    inputs: dict[str, InputFingerprint] = Field(default_factory=dict)
    results: dict[str, dict[str, CandidateEntry]] = Field(default_factory=dict)
    complete: bool = False
    wall_s: Optional[float] = None
    time: Optional[StepTimes] = None  # where the child's time went (harness/measurement/step_clock.py)


def announce_switched_on() -> None:
    print(PROGRESS_PREFIX + json.dumps(SWITCHED_ON), flush=True)


class ProgressWriter:
    """The child's progress lines for the parent's bar, at most a few a second."""

    MIN_INTERVAL_S = 0.25

    def __init__(self, candidate: str, total: int):
        self.candidate, self.total, self.done, self._last = candidate, total, 0, 0.0

    def phase(self, name: str) -> None:
        self._emit(name, force=True)

    def tick(self, runs: int) -> None:
        self.done += runs
        self._emit(None, force=False)

    def _emit(self, phase: Optional[str], force: bool) -> None:
        now = time.monotonic()
        if not force and now - self._last < self.MIN_INTERVAL_S:
            return
        self._last = now
        event = {"candidate": self.candidate, "done": self.done, "total": self.total, "phase": phase}
        print(PROGRESS_PREFIX + json.dumps(event), flush=True)
