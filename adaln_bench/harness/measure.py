"""The measurement sequence for one built candidate: fingerprint and probes, then accuracy and latency per T.

Which parts run is the child spec's choice (`Parts`): a latency-only measurement makes no run but the timed
ones. Each part is documented in docs/spec.md (#4-batch-invariance-probes, #5-accuracy-against-fp64,
#6-latency).
"""
from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass
from typing import Callable, ContextManager, Optional

import torch

from adaln_bench.harness import plan as P
from adaln_bench.harness.accuracy import measure_accuracy
from adaln_bench.harness.device_time import Reference, device_time_point
from adaln_bench.harness.fingerprint import fingerprint
from adaln_bench.harness.inputs import Params, make_temb
from adaln_bench.harness.probes import probe_batch_invariance
from adaln_bench.harness.protocol import ProgressWriter
from adaln_bench.harness.timing import time_call
from adaln_bench.harness.workload import Workload
from adaln_bench.kernels.registry import Implementation
from adaln_bench.reports.schema import AccuracyLatency, CandidateResult
from adaln_bench.shape import Shape


@dataclass(frozen=True)
class Parts:
    """What to measure: the probes (with the fingerprint), the errors against FP64, the times."""

    probes: bool = True
    accuracy: bool = True
    latency: bool = True


def measure_candidate(impl: Implementation, params: Params, shape: Shape, device: torch.device, plan: P.ProbePlan,
                      parts: Parts = Parts(), mode_off: Callable[[], ContextManager] = contextlib.nullcontext,
                      progress: Optional[ProgressWriter] = None) -> CandidateResult:
    """The chosen parts for one candidate, as the report's CandidateResult."""
    progress = progress or ProgressWriter(impl.source, 0)
    started = time.monotonic()
    prints = invariance = None
    if parts.probes:
        workload = Workload(impl, params, shape, device)
        progress.phase("fingerprint")
        prints = fingerprint(workload)
        progress.phase("batch invariance")
        invariance = probe_batch_invariance(workload, plan, progress.tick)
        del workload  # its cached batch is large

    table: dict[str, AccuracyLatency] = {}
    if parts.accuracy or parts.latency:
        for tokens in plan.accuracy_sizes:
            progress.phase(f"accuracy and latency, T={tokens}")
            table[str(tokens)] = measure_point(impl, params, shape, device, tokens, parts, mode_off)
            progress.tick(0)
    return CandidateResult(
        source=impl.source,
        has_backward=impl.has_backward,
        batch_invariance=invariance,
        accuracy_latency=table,
        fingerprint=prints,
        details=dict(impl.details) or None,
        wall_s=round(time.monotonic() - started, 3),
    )


REFERENCE_WHAT = ("the cuBLAS path at the same T, F.linear(F.silu(temb).to(bf16), W, b) (+ its autograd backward), "
                  "captured with the mode switched off where it can be")


def training_step(forward: Callable, temb: torch.Tensor, params: Params, ones: torch.Tensor) -> Callable[[], None]:
    """One training step as every timing takes it: fresh leaves, `forward`, backward with `ones`."""

    def step() -> None:
        t = temb.detach().requires_grad_()
        w = params.weight.detach().requires_grad_()
        b = params.bias.detach().requires_grad_()
        forward(t, w, b).backward(ones)

    return step


def cublas_reference(temb: torch.Tensor, params: Params, ones: Optional[torch.Tensor],
                     mode_off: Callable[[], ContextManager]) -> Reference:
    """The workload every candidate's device time is sampled beside (docs/spec.md#6-latency): the op's plain
    cuBLAS path, the same in every report of a mode, so that a diff can judge the ratio. No step without `ones`
    (a candidate without a backward)."""
    from adaln_bench.kernels.diffusers_baseline import replay

    def forward() -> None:
        with mode_off(), torch.no_grad():
            replay(temb, params.weight, params.bias)

    if ones is None:
        return Reference(REFERENCE_WHAT, forward)
    plain_step = training_step(replay, temb, params, ones)

    def step() -> None:
        with mode_off():
            plain_step()

    return Reference(REFERENCE_WHAT, forward, step)


def measure_point(impl: Implementation, params: Params, shape: Shape, device: torch.device, tokens: int,
                  parts: Parts, mode_off: Callable[[], ContextManager]) -> AccuracyLatency:
    """Errors and times at one T; a part not measured is null."""
    fwd_err, grad_err = (None, None)
    if parts.accuracy:
        fwd_err, grad_err = measure_accuracy(impl, params, shape, device, tokens, mode_off)
    if not parts.latency:
        return AccuracyLatency(fwd_rel_err=fwd_err, grad_rel_err=grad_err, fwd_us=None)
    temb = make_temb(tokens, shape, P.ACCURACY_SEED, device)

    def forward() -> None:
        with torch.no_grad():
            impl.forward(temb, params.weight, params.bias)

    fwd, clock = time_call(forward, device)
    entry = AccuracyLatency(fwd_rel_err=fwd_err, grad_rel_err=grad_err, fwd_us=fwd.median, fwd_us_dist=fwd,
                            clock=clock)
    ones = step = None
    if impl.has_backward:
        ones = torch.ones((tokens, shape.out_features), dtype=torch.bfloat16, device=device)
        step = training_step(impl.forward, temb, params, ones)
        fb, _ = time_call(step, device)
        entry.fwd_bwd_us, entry.fwd_bwd_us_dist = fb.median, fb
    try:  # after the event figures, which stay RL-Kernel's (docs/spec.md#6-latency); None on a CPU
        timed = device_time_point(forward, step, device, reference=cublas_reference(temb, params, ones, mode_off))
        if timed is not None:
            entry.device_time = timed
    except Exception as exc:  # noqa: BLE001 - a candidate that cannot be timed so keeps its other results
        entry.device_time_error = f"{type(exc).__name__}: {exc}"
    return entry
