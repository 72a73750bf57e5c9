"""A `kernel-bench` output, as pydantic models: what the command writes and what `report` and `diff` read.

One output holds one or more operators; per operator, per size and per kind ("fwd", "fwd_bwd"), each subject's
figure: the stock path ("stock"), the candidates, and the copy of the operator's fewest bytes ("copy"). Every
figure is the median over processes of one process's figure (kernel_bench/combine.py). Unknown keys are kept, as
in the report's schema, so a newer writer's additions survive a read.
"""
from __future__ import annotations

from typing import Literal, Optional

from pydantic import Field

from adaln_bench.datamodel.schema import SizeKey, _Model

KERNEL_BENCH_KIND = "kernel_bench"
KERNEL_BENCH_VERSION = 1
STOCK, COPY = "stock", "copy"  # the subjects every size has: the operator's stock path, the copy of its bytes
KINDS = ("fwd", "fwd_bwd")


class Figure(_Model):
    """One subject at one size and kind. `vs_stock`: median over rounds of subject / stock (paired in the same
    rounds); `of_copy`: of copy / subject; `of_floor`: the floor's time over the subject's (where a floor is
    known). Each `per_process_<field>` list holds the processes' own figures."""

    processes: int = Field(ge=0)
    us: Optional[float] = None
    vs_stock: Optional[float] = None
    of_copy: Optional[float] = None
    host_us: Optional[float] = None
    tbps: Optional[float] = None
    tflops: Optional[float] = None
    of_floor: Optional[float] = None
    per_process_us: list[Optional[float]] = Field(default_factory=list)
    per_process_vs_stock: list[Optional[float]] = Field(default_factory=list)


class SizeRow(_Model):
    """One size: the bytes the copy moves per kind, the input sets rotated, and each kind's figures."""

    bytes: dict[str, float] = Field(default_factory=dict)
    copies: int = 1
    fwd: dict[str, Figure] = Field(default_factory=dict)
    fwd_bwd: dict[str, Figure] = Field(default_factory=dict)


class SubjectBits(_Model):
    """Bits across sizes for one subject (harness/measurement/probes.py `probe_prefixes`), or why it could not be
    checked."""

    rows_compared: int = 0
    rows_differ: int = 0
    params_repeatable: dict[str, Optional[bool]] = Field(default_factory=dict)
    failures: list[str] = Field(default_factory=list)
    invariant: Optional[bool] = None
    repeatable: Optional[bool] = None
    error: Optional[str] = None


class Bits(_Model):
    seed: int
    sizes: list[int]
    subjects: dict[str, SubjectBits]


class Verdict(_Model):
    passed: bool
    target: str
    why: str
    processes: int


class OperatorResult(_Model):
    subjects: dict[str, str] = Field(default_factory=dict)
    # The inputs whose gradients are tables (the gathered operators'), in the operator's order.
    table_grads: list[str] = Field(default_factory=list)
    sizes: list[int] = Field(default_factory=list)
    rows: dict[SizeKey, SizeRow] = Field(default_factory=dict)
    bits: Optional[Bits] = None
    # {subject: {size: {"fwd": error, "grads": {input: error}} or {"error": why}}}
    accuracy: Optional[dict[str, dict[str, dict]]] = None
    verdicts: dict[str, dict[str, dict[str, Verdict]]] = Field(default_factory=dict)
    error_verdicts: dict[str, dict[str, dict[str, Optional[bool]]]] = Field(default_factory=dict)
    # Per library and size, each C entry point's device time alone (the projection's bundled libraries).
    entries: Optional[dict[str, dict[str, dict[str, Optional[float]]]]] = None


class Combined(_Model):
    ops: dict[str, OperatorResult]


class ToolRecord(_Model):
    commit: Optional[str] = None
    dirty: Optional[bool] = None
    torch: Optional[str] = None
    cuda: Optional[str] = None


class DeviceRecord(_Model):
    name: str
    capability: Optional[str] = None


class KernelBenchReport(_Model):
    kind: Literal["kernel_bench"] = KERNEL_BENCH_KIND
    schema_version: int = KERNEL_BENCH_VERSION
    tool: ToolRecord
    device: DeviceRecord
    shape: str
    sizes: dict[str, list[int]]
    candidates: list[str] = Field(default_factory=list)
    # Per operator, size and kind: the floor (bytes, flops, floor_us, bound) the figures are set against.
    floors: dict[str, dict[str, dict[str, dict]]] = Field(default_factory=dict)
    processes: int
    process_errors: list[str] = Field(default_factory=list)
    combined: Combined
    subject_errors: list[tuple[str, str]] = Field(default_factory=list)
    per_process: list[dict] = Field(default_factory=list)
    # Where an output of an older layout was read from ("projection" or "operators"), None for this one.
    converted_from: Optional[str] = None

    @property
    def ops(self) -> dict[str, OperatorResult]:
        return self.combined.ops

    def document(self) -> dict:
        """The plain data the renderers and the verdicts read."""
        return self.model_dump(mode="json", exclude_none=False)
