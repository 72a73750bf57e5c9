"""What the parent tells a mode's child process, and what the child writes back (validated both ways)."""
from __future__ import annotations

from typing import Literal, Optional

from pydantic import BaseModel, ConfigDict, Field

from adaln_bench.reports.schema import (CandidateEntry, Environment, InputFingerprint, ModeEnvironment,
                                        ModeObservation, Shape)

PROGRESS_PREFIX = "@@adaln-bench-progress "


class ChildSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    mode: str
    modes_file: Optional[str] = None
    megatron_src: Optional[str] = None
    candidates: list[str]
    device: Literal["cuda", "cpu"]
    shape: Shape
    quick: bool
    result_path: str
    # Only switch the mode on and report what was seen (for `adaln-bench modes`).
    check_only: bool = False
    probes: bool = True
    accuracy: bool = True
    latency: bool = True


class ChildResult(BaseModel):
    mode: str
    status: Literal["ok", "unavailable", "running"]
    reason: Optional[str] = None
    observed: Optional[ModeObservation] = None
    environment: Optional[Environment] = None
    runtime: Optional[ModeEnvironment] = None
    inputs: Optional[InputFingerprint] = None
    # Keyed by the name the report uses, e.g. "diffusers[plain]".
    candidates: dict[str, CandidateEntry] = Field(default_factory=dict)
    complete: bool = False
    wall_s: Optional[float] = None
