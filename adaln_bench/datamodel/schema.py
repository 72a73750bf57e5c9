"""The report, as pydantic models: the one schema the child writes, the parent validates and every reader uses.

The format is RL-Kernel's prior-art report (results/b200/adaln_projection/adaln_projection.b200.prior-art.json) with fields
added, never removed or renamed, so that either kind of report reads here and diffs against the other.
Fields this project adds are optional, so the reference file validates unchanged; writers dump with
`exclude_unset=True` so that reading and writing a file gives back the same data.
"""
from __future__ import annotations

from typing import Annotated, Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator

SCHEMA_VERSION = 1
REPORT_KIND = "adaln_bench"
PRIOR_ART_KIND = "h3_prior_art"


# A time in µs is positive and an error against FP64 is not negative: the readers divide by the one and take
# the logarithm of the other.
Duration = Annotated[float, Field(gt=0)]
RelError = Annotated[float, Field(ge=0)]


class _Model(BaseModel):
    # Unknown keys are kept (a newer writer may add some); NaN and infinity are refused: JSON has neither.
    model_config = ConfigDict(extra="allow", ser_json_inf_nan="null", allow_inf_nan=False)


# --- batch invariance -------------------------------------------------------------------------------


class AllRowsCount(_Model):
    rows: int
    fwd_differ: int
    rowgrad_differ: int


class SubBatchCounts(_Model):
    full_batch: int
    sub_batch_sizes: list[int]
    sub_batches: int
    fwd_differ: int
    rowgrad_differ: int


class SweepFailure(_Model):
    seed: int
    batch: int
    position: int
    row: int


class SweepCounts(_Model):
    batch_sizes: list[int]
    probe_rows: list[int]
    comparisons: int
    differ: int
    first_failures: list[SweepFailure]


class RandomRowFailure(_Model):
    size: int
    position: int
    row: int
    fwd: bool
    rowgrad: bool


class RandomRowsCounts(_Model):
    """The seeded random probe (harness/measurement/random_rows.py): one batch size per octave, random rows and positions."""

    rng_seed: int
    data_seed: int
    pool: int
    sizes: list[int]
    comparisons: int
    fwd_differ: int
    rowgrad_differ: int
    first_failures: list[RandomRowFailure]


class ProbeRuns(_Model):
    """How the probes' runs were made (harness/measurement/graphed_runs.py): replayed from CUDA graphs or eager.
    Informational: the counts and verdicts above are the same either way, which the graphs are checked for."""

    replayed: int
    eager: int
    graphs: int  # captured
    # Run sizes (rows) whose first replay differed from the eager run of the same rows: eager from then on.
    eager_sizes: Optional[list[int]] = None
    graphs_off: Optional[str] = None  # why no run was replayed after some point (a failed capture)


class BatchInvariance(_Model):
    all_rows: dict[str, AllRowsCount]
    # None: the candidate differentiates no parameter (RL-Kernel's reports write null there too).
    params_repeatable: Optional[bool]
    full_vs_sub_batches: SubBatchCounts
    batch_size_sweep: SweepCounts
    batch_invariant: bool
    # Added here (absent from RL-Kernel's report): counted in batch_invariant when present.
    random_rows: Optional[RandomRowsCounts] = None
    # Added here: how the runs were made (CUDA graphs or eager); absent: every run eager.
    runs: Optional[ProbeRuns] = None


# --- accuracy and latency ---------------------------------------------------------------------------


class Distribution(_Model):
    """A timing distribution in microseconds: the median alone cannot tell noise from change."""

    min: Duration
    q1: Duration
    median: Duration
    q3: Duration
    max: Duration
    count: int


class GradRelErr(_Model):
    """One relative error per differentiated input, keyed by the input's name in the operator's order (the
    projection's: temb, w, b; gate_residual's: res, y, gate). The keys are the operator's, so they are kept
    as they come rather than declared here; their values are typed all the same, for the readers do arithmetic
    with them."""

    __pydantic_extra__: dict[str, Optional[RelError]] = Field(init=False)  # type: ignore[assignment]

    def errors(self) -> dict[str, Optional[RelError]]:
        return dict(self.__pydantic_extra__ or {})


DeviceTimeMethod = Literal["cuda_graph", "queued"]


class DeviceReference(_Model):
    """The workload a candidate's device time was sampled beside (harness/measurement/device_time.py `Reference`), in the
    same rounds: its samples pair with the candidate's one for one (pooled in the same process order), and
    `*_ratio` is the median of the candidate's samples over the reference's, round by round."""

    what: str
    fwd_us: Duration
    fwd_samples: list[Duration]
    fwd_ratio: Optional[float] = None
    fwd_bwd_us: Optional[Duration] = None
    fwd_bwd_samples: Optional[list[Duration]] = None
    fwd_bwd_ratio: Optional[float] = None


class DeviceTime(_Model):
    """GPU time per call without the host's launch time (harness/measurement/device_time.py), every sample kept.

    Samples are in µs, pooled over `processes` fresh processes (`run --repeat K`); the medians are of the
    pooled samples, the noise is the relative half-width of the pooled median's 95 % interval. The SM
    clock is the lowest reading of any process before and after sampling; `throttled` is true when it fell
    during any process's measurement.
    """

    method: DeviceTimeMethod  # of the forward; the forward + backward's is `fwd_bwd_method`
    fwd_us: Duration
    fwd_samples: list[Duration]
    fwd_rel_noise: Optional[float] = None
    fwd_process_medians: Optional[list[Duration]] = None
    fwd_bwd_us: Optional[Duration] = None
    fwd_bwd_samples: Optional[list[Duration]] = None
    fwd_bwd_rel_noise: Optional[float] = None
    fwd_bwd_process_medians: Optional[list[Duration]] = None
    fwd_bwd_method: Optional[DeviceTimeMethod] = None
    processes: Annotated[int, Field(ge=1)] = 1
    sm_clock_mhz_before: Optional[float] = None
    sm_clock_mhz_after: Optional[float] = None
    sm_clock_source: Optional[str] = None
    throttled: Optional[bool] = None
    # Why a graph could not be captured, when a method is "queued" for that reason.
    capture_error: Optional[str] = None
    # GPU time each callable ran, its samples dropped, before the first kept sample (StopRule.warmup_ms);
    # None in reports written before the warm-up existed, whose first samples were kept.
    warmup_ms: Optional[float] = None
    # The reference sampled beside the candidate (None in older reports), or why it could not be.
    reference: Optional[DeviceReference] = None
    reference_error: Optional[str] = None


class AccuracyLatency(_Model):
    fwd_rel_err: Optional[RelError]
    grad_rel_err: Optional[GradRelErr] = None
    # RL-Kernel's figures, kept as they are: median of 100 CUDA-event samples after 20 warm-ups.
    fwd_us: Optional[Duration]
    fwd_bwd_us: Optional[Duration] = None
    # Added here: the distributions behind the two medians, and the clock they came from.
    fwd_us_dist: Optional[Distribution] = None
    fwd_bwd_us_dist: Optional[Distribution] = None
    clock: Optional[Literal["cuda_event", "monotonic"]] = None
    # Added here: device time without host noise (CUDA only), or why it could not be taken.
    device_time: Optional[DeviceTime] = None
    device_time_error: Optional[str] = None
    # Added here, in runs without probes (--accuracy-only): a second forward + backward of the accuracy inputs
    # gave the same parameter gradients bit for bit (false: summed in an order that changes, e.g. with atomics).
    params_repeatable: Optional[bool] = None


# --- results ----------------------------------------------------------------------------------------


ColdStartStatus = Literal["ok", "failed", "crashed", "timeout"]


class ColdStart(_Model):
    """The candidate's first forward + backward in a fresh process, as a training job's first step meets it.

    A status other than "ok" is a failure of the candidate: its other results are kept beside it (they were
    measured in a warmed process), and report and diff show the candidate as failed.
    """

    status: ColdStartStatus
    steps_passed: list[str] = Field(default_factory=list)
    failed_step: Optional[str] = None
    reason: Optional[str] = None
    stderr_tail: Optional[str] = None
    wall_s: Optional[float] = None
    # How the fresh process was made: a new interpreter, or on a CPU a fork of a server that had imported torch
    # (and a baseline mode's candidate libraries) and run nothing (harness/processes/fork_server.py). Absent: before it.
    process: Optional[Literal["interpreter", "fork"]] = None


# A size key of `accuracy_latency` (T or S): the readers sort and compare them as integers.
SizeKey = Annotated[str, StringConstraints(pattern=r"^[0-9]{1,9}$")]


class CandidateResult(_Model):
    source: str
    has_backward: bool
    batch_invariance: Optional[BatchInvariance] = None
    accuracy_latency: dict[SizeKey, AccuracyLatency] = Field(default_factory=dict)
    # Added here: SHA-256 of the full-batch output and d_temb on the fixed consistency input.
    fingerprint: Optional["Fingerprint"] = None
    details: Optional[dict[str, str]] = None
    wall_s: Optional[float] = None
    cold_start: Optional[ColdStart] = None


class Fingerprint(_Model):
    """SHA-256 of the outputs and, per differentiated row input X, of its gradient as `d_X_sha256` (the
    projection's `d_temb_sha256`)."""

    rows: int
    seed: int
    output_sha256: str
    d_temb_sha256: Optional[str] = None

    @model_validator(mode="after")
    def _hashes_are_text(self) -> "Fingerprint":
        _check_extra_hashes(self, "d_")
        return self

    def row_grad_hashes(self) -> dict[str, Optional[str]]:
        fields = {"d_temb_sha256": self.d_temb_sha256} if "d_temb_sha256" in self.model_fields_set else {}
        extra = {k: v for k, v in (self.__pydantic_extra__ or {}).items() if k.startswith("d_")}
        return {**fields, **extra}


def _check_extra_hashes(model: BaseModel, prefix: str) -> None:
    """The hashes kept as keys of their own (`d_x_sha256`, `x_sha256`) are compared and shown as text."""
    for key, value in (model.__pydantic_extra__ or {}).items():
        if key.startswith(prefix) and key.endswith("_sha256") and value is not None and not isinstance(value, str):
            raise ValueError(f"{key} must be a string (a SHA-256 in hex)")


CandidateStatus = Literal["unavailable", "failed", "crashed", "timeout", "interrupted"]


class CandidateUnavailable(_Model):
    """A candidate (or its whole mode) that gave no result, and why."""

    unavailable: str
    status: Optional[CandidateStatus] = None


CandidateEntry = Union[CandidateResult, CandidateUnavailable]


# --- environment ------------------------------------------------------------------------------------


class Environment(_Model):
    gpu: Optional[str]
    capability: Optional[list[int]]
    torch: Optional[str]
    cuda: Optional[str]
    python: Optional[str]
    tf32: Optional[bool]
    libraries: dict[str, Optional[str]]
    megatron_source_commit: Optional[str] = None
    # Added here: where a staged Megatron / Transformer Engine came from (tools/stage_megatron.py's manifest:
    # package versions, the core library's RECORD hash, its reduced hash and how it was made, the source commit).
    megatron_staging: Optional[dict] = None
    # Added here: SGLang's bf16 matmul path as its modes observed it ("triton_persistent" or "deepgemm").
    sglang_matmul_path: Optional[str] = None
    mode_environment: dict[str, dict[str, str]] = Field(default_factory=dict)
    # Added here.
    device: Optional[str] = None
    hostname: Optional[str] = None
    platform: Optional[str] = None
    interpreter: Optional[str] = None  # the Python executable this environment was read under
    cpu_threads: Optional[int] = None  # torch's intra-op threads in a CPU run's children
    # Added here: true where the children measured as clients of CUDA's Multi-Process Service (`run --mps`),
    # under which device times read higher (results/h100/evidence/mps/022885c/); absent otherwise.
    mps: Optional[bool] = None


class ModeObservation(_Model):
    """What a mode's child process saw after switching the mode on: proof that it took effect."""

    env_seen: dict[str, Optional[str]] = Field(default_factory=dict)
    preferred_blas: Optional[str] = None
    bf16_reduced_precision_reduction: Optional[bool] = None
    fp16_reduced_precision_reduction: Optional[bool] = None
    tf32_matmul: Optional[bool] = None
    tf32_cudnn: Optional[bool] = None
    float32_matmul_precision: Optional[str] = None
    deterministic_algorithms: Optional[bool] = None
    aten_overrides: list[str] = Field(default_factory=list)
    library: Optional[str] = None
    library_version: Optional[str] = None
    switch_path: Optional[str] = None
    reference_mode_off: Optional[bool] = None
    # The file that defines the switch and its SHA-256 (hex): a stand-in can have the same version string,
    # not the same bytes as the wheel's file (tools/slim_frameworks.py check-report compares them).
    module_file: Optional[str] = None
    module_sha256: Optional[str] = None
    # The staged module the switch came from (a Megatron staging), when there is one.
    staging_module: Optional[str] = None
    # Where the switch sends a bf16 matrix product, read from the library's own state: SGLang's
    # "triton_persistent" or "deepgemm".
    matmul_path: Optional[str] = None


class ModeEnvironment(_Model):
    """The interpreter a mode's child ran under, and what that interpreter's environment holds."""

    interpreter: Optional[str] = None
    python: Optional[str] = None
    torch: Optional[str] = None
    cuda: Optional[str] = None
    framework: Optional[str] = None  # the mode's library (pip name), e.g. "vllm"
    framework_version: Optional[str] = None


class DrawGeometryRecord(_Model):
    """The launch geometry the seeded CUDA draws followed (`run --draw-geometry`): "native" (torch's own
    generator on the running GPU, sms null) or as torch draws on a GPU with `sms` multiprocessors."""

    name: str
    sms: Optional[int] = None


class InputFingerprint(_Model):
    """SHA-256 of the seeded inputs (docs/spec.md#3-inputs) as one child generated them: equal in every mode, or the
    output fingerprints and the consistency matrix compare different numbers."""

    seed: int
    rows: int
    # The projection's three inputs, as its reports have named them; another operator's inputs are keys of
    # their own, `<name>_sha256` (norm_modulate: x_sha256, w_sha256, sh_sha256, sc_sha256, idx_sha256).
    temb_sha256: Optional[str] = None
    weight_sha256: Optional[str] = None
    bias_sha256: Optional[str] = None
    upstream_sha256: str
    # torch.randperm(rows) from a CPU generator seeded `seed`: the batch-size sweep draws its fillers so.
    permutation_sha256: Optional[str] = None
    draw_geometry: Optional[DrawGeometryRecord] = None

    @model_validator(mode="after")
    def _hashes_are_text(self) -> "InputFingerprint":
        _check_extra_hashes(self, "")
        return self

    def tensor_hashes(self) -> dict[str, str]:
        """Every input's hash by its key (`temb_sha256`, …), the upstream and permutation left out."""
        data = self.model_dump(exclude_unset=True)
        return {k: v for k, v in data.items() if k.endswith("_sha256") and k not in
                ("upstream_sha256", "permutation_sha256") and v is not None}


ModeStatus = Literal["ok", "unavailable", "failed", "crashed", "timeout", "interrupted"]


class ModeRun(_Model):
    status: ModeStatus
    reason: Optional[str] = None
    wall_s: Optional[float] = None
    gpu_index: Optional[int] = None
    observed: Optional[ModeObservation] = None
    stderr_tail: Optional[str] = None
    returncode: Optional[int] = None
    environment: Optional[ModeEnvironment] = None
    inputs: Optional[InputFingerprint] = None


class Shape(_Model):
    """The model's sizes an operator reads (the projection's: D, H, M and N = 6·M·H)."""

    dim: Optional[int] = None
    hidden: Optional[int] = None
    modalities: Optional[int] = None
    out_features: Optional[int] = None
    frequency: Optional[int] = None
    preset: Optional[str] = None

    def sizes(self) -> dict[str, int]:
        return {k: v for k, v in self.model_dump(exclude_none=True).items() if k != "preset"}


class ToolInfo(_Model):
    name: str
    version: str
    commit: Optional[str]
    dirty: Optional[bool]
    argv: list[str] = Field(default_factory=list)


class Report(_Model):
    kind: str
    rfc: Optional[str] = None
    op: str
    rl_kernel_commit: Optional[str] = None
    tracked_tree_dirty: Optional[bool] = None
    environment: Environment
    quick: bool
    results: dict[str, dict[str, CandidateEntry]]
    # Added here: all optional, so that the reference report validates unchanged.
    schema_version: Optional[int] = None
    tool: Optional[ToolInfo] = None
    shape: Optional[Shape] = None
    device: Optional[str] = None
    modes: Optional[dict[str, ModeRun]] = None
    incomplete: Optional[bool] = None
    started_at: Optional[str] = None
    wall_s: Optional[float] = None
    # Modes whose seeded inputs differ from those of the modes under the parent's interpreter.
    inputs_differ: Optional[list[str]] = None
    draw_geometry: Optional[DrawGeometryRecord] = None


CandidateResult.model_rebuild()
