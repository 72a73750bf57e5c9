"""The measurement sequence for one built candidate: fingerprint and probes, then accuracy and latency per size.

Which parts run is the run configuration's choice (`Parts`): a latency-only measurement makes no run but the timed
ones. Each part is documented in docs/spec.md (#4-batch-invariance-probes, #5-accuracy-against-fp64,
#6-latency).
"""
from __future__ import annotations

import contextlib
import time
from typing import Callable, ContextManager, Mapping, Optional, Protocol

import torch

from adaln_bench.harness.measurement import plan as P
from adaln_bench.harness.measurement.accuracy import Errors, measure_accuracy
from adaln_bench.harness.measurement.device_time import Reference, device_time_point
from adaln_bench.harness.measurement.fingerprint import fingerprint
from adaln_bench.harness.measurement.graphed_runs import GraphedWorkload
from adaln_bench.harness.measurement.parts import Parts
from adaln_bench.harness.measurement.probes import probe_batch_invariance
from adaln_bench.harness.measurement.step_clock import ACCURACY, LATENCY, PROBES, StepClock
from adaln_bench.harness.measurement.subject import Subject
from adaln_bench.harness.measurement.timing import time_call
from adaln_bench.harness.measurement.workload import Workload
from adaln_bench.ops.draws import draw_rows
from adaln_bench.datamodel.schema import AccuracyLatency, CandidateResult, ProbeRuns
from adaln_bench.shape import Shape


class Progress(Protocol):
    """Where the sequence reports its phases and runs (a child passes its protocol's progress writer)."""

    def phase(self, name: str) -> None: ...

    def tick(self, runs: int) -> None: ...


class _Silent:
    def phase(self, name: str) -> None:
        pass

    def tick(self, runs: int) -> None:
        pass


def measure_candidate(subject: Subject, params: dict[str, torch.Tensor], shape: Shape, device: torch.device,
                      plan: P.ProbePlan, parts: Parts = Parts(),
                      mode_off: Callable[[], ContextManager] = contextlib.nullcontext,
                      progress: Optional[Progress] = None, steps: Optional[StepClock] = None,
                      probe_graphs: bool = False) -> CandidateResult:
    """The chosen parts for one candidate, as the report's CandidateResult.

    Each part is a step of `steps` (harness/measurement/step_clock.py): the probes and the errors share the GPU
    with other processes, the latency of every size is one exclusive step, after the errors of every size.
    On CUDA with `probe_graphs` the probes replay their runs of few rows from CUDA graphs
    (harness/measurement/graphed_runs.py)."""
    impl = subject.impl
    progress = progress or _Silent()
    steps = steps or StepClock()
    started = time.monotonic()
    prints = invariance = None
    if parts.probes:
        with steps.step(PROBES) as step:
            workload = Workload(subject, params, shape, device)
            progress.phase("fingerprint")
            prints = fingerprint(workload, subject)
            progress.phase("batch invariance")

            def tick(runs: int) -> None:
                progress.tick(runs)
                step.breathe()

            runner = GraphedWorkload(workload) if probe_graphs and device.type == "cuda" else workload
            invariance = probe_batch_invariance(runner, plan, tick)
            if isinstance(runner, GraphedWorkload):
                invariance.runs = ProbeRuns(**runner.counts())
            del workload, runner  # its cached batch is large

    errors: dict[int, Errors] = {}
    if parts.accuracy:
        with steps.step(ACCURACY) as step:
            for tokens in plan.accuracy_sizes:
                progress.phase(f"accuracy, {subject.op.family.size_symbol}={tokens}")
                # Without probes, nothing else says whether the parameter gradients repeat: ask the errors.
                errors[tokens] = measure_accuracy(subject, params, shape, device, tokens, mode_off,
                                                  repeat_params=not parts.probes)
                step.breathe()
    table: dict[str, AccuracyLatency] = {}
    if parts.accuracy or parts.latency:
        for tokens in plan.accuracy_sizes:
            err = errors.get(tokens, Errors(None, None))
            repeat = {} if err.params_repeatable is None else {"params_repeatable": err.params_repeatable}
            table[str(tokens)] = AccuracyLatency(fwd_rel_err=err.fwd, grad_rel_err=err.grads, fwd_us=None, **repeat)
    if parts.latency:
        with steps.step(LATENCY, exclusive=True):
            for tokens in plan.accuracy_sizes:
                progress.phase(f"latency, {subject.op.family.size_symbol}={tokens}")
                measure_latency(table[str(tokens)], subject, params, shape, device, tokens, mode_off)
                progress.tick(0)
    return CandidateResult(
        source=impl.source,
        has_backward=subject.has_backward,
        batch_invariance=invariance,
        accuracy_latency=table,
        fingerprint=prints,
        details=dict(impl.details) or None,
        wall_s=round(time.monotonic() - started, 3),
    )


def training_step(forward: Callable[[Mapping[str, torch.Tensor]], tuple], subject: Subject,
                  inputs: Mapping[str, torch.Tensor], ones: list[torch.Tensor]) -> Callable[[], None]:
    """One training step as every timing takes it: fresh leaves, `forward`, backward with `ones`."""

    def step() -> None:
        torch.autograd.backward(forward(subject.leaves(inputs)), ones)

    return step


def stock_reference(subject: Subject, inputs: Mapping[str, torch.Tensor], ones: Optional[list[torch.Tensor]],
                    mode_off: Callable[[], ContextManager], shape: Shape, tokens: int) -> Reference:
    """The workload every candidate's device time is sampled beside (docs/spec.md#6-latency): the operator's
    stock path, the same in every report of a mode, so that a diff can judge the ratio. No step without
    `ones` (a candidate without a backward)."""
    stock = subject.as_stock()

    def forward() -> None:
        with mode_off(), torch.no_grad():
            stock.stock_forward(inputs)

    if ones is None:
        return Reference(subject.op.stock_what, forward)
    plain_step = training_step(stock.stock_forward, stock, inputs, stock_ones(subject, ones, shape, tokens))

    def step() -> None:
        with mode_off():
            plain_step()

    return Reference(subject.op.stock_what, forward, step)


def stock_ones(subject: Subject, ones: list[torch.Tensor], shape: Shape, tokens: int) -> list[torch.Tensor]:
    """The candidate's upstream ones where the stock path's outputs have their shapes (no second copy: the
    projection's is 400 MB at T = 2048), else ones of the stock outputs' declared shapes."""
    specs = subject.op.outputs
    if [tuple(o.shape) for o in ones] == [o.shape(shape, tokens) for o in specs] and \
            [o.dtype for o in ones] == [o.dtype for o in specs]:
        return ones
    device = ones[0].device
    return [torch.ones(o.shape(shape, tokens), dtype=o.dtype, device=device) for o in specs]


def measure_latency(entry: AccuracyLatency, subject: Subject, params: dict[str, torch.Tensor], shape: Shape,
                    device: torch.device, tokens: int, mode_off: Callable[[], ContextManager]) -> None:
    """The times at one size, into `entry`: the CUDA-event figures, then the device time."""
    inputs = {**draw_rows(subject.op, shape, P.ACCURACY_SEED, tokens, device), **params}
    mine = {n: inputs[n] for n in subject.inputs}

    def forward() -> None:
        with torch.no_grad():
            subject.forward(mine)

    fwd, clock = time_call(forward, device)
    entry.fwd_us, entry.fwd_us_dist, entry.clock = fwd.median, fwd, clock
    ones = step = None
    if subject.has_backward:
        # Of the declared outputs' shapes and dtypes: no extra call of the candidate outside the timed ones.
        ones = [torch.ones(o.shape(shape, tokens), dtype=o.dtype, device=device) for o in subject.op.outputs]
        step = training_step(subject.forward, subject, mine, ones)
        fb, _ = time_call(step, device)
        entry.fwd_bwd_us, entry.fwd_bwd_us_dist = fb.median, fb
    try:  # after the event figures, which stay RL-Kernel's (docs/spec.md#6-latency); None on a CPU
        timed = device_time_point(forward, step, device, reference=stock_reference(subject, inputs, ones, mode_off,
                                                                                      shape, tokens))
        if timed is not None:
            entry.device_time = timed
    except Exception as exc:  # noqa: BLE001 - a candidate that cannot be timed so keeps its other results
        entry.device_time_error = f"{type(exc).__name__}: {exc}"
