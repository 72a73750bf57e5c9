"""A mode's child process: `python -m adaln_bench.harness.child SPEC.json`.

The parent starts it with the mode's variables already in its environment, so they are in place before
torch is imported here. It switches the mode on, measures each candidate, and rewrites its result file
after every candidate, so that a crash later keeps what was finished.
"""
from __future__ import annotations

import contextlib
import ctypes
import hashlib
import json
import os
import sys
import time
import traceback
import warnings
from pathlib import Path
from typing import Callable, Iterator, Optional

from adaln_bench.harness.protocol import PROGRESS_PREFIX, ChildResult, ChildSpec
from adaln_bench.reports.io import write_text_atomic

warnings.filterwarnings("ignore", message="Failed to initialize NumPy")  # numpy is optional


class Progress:
    """Progress lines on stdout for the parent's bar, at most a few a second."""

    def __init__(self, candidate: str, total: int):
        self.candidate, self.total, self.done, self._last = candidate, total, 0, 0.0

    def phase(self, name: str) -> None:
        self._emit(name, force=True)

    def tick(self, runs: int) -> None:
        self.done += runs
        self._emit(None, force=False)

    def _emit(self, phase: Optional[str], force: bool) -> None:
        now = time.monotonic()
        if not force and now - self._last < 0.25:
            return
        self._last = now
        event = {"candidate": self.candidate, "done": self.done, "total": self.total, "phase": phase}
        print(PROGRESS_PREFIX + json.dumps(event), flush=True)


class ModeSwitch:
    """The mode as switched on in this process, and a context that switches it off for the FP64 reference."""

    def __init__(self, mode, options, on_cuda: bool):
        from adaln_bench.modes import torch_settings

        self.mode, self.switch, self._restore = mode, None, None
        self._apply = (lambda: torch_settings.apply(mode.torch_settings, on_cuda)) if mode.torch_settings else None
        if self._apply:
            self._restore = self._apply()
        if mode.enable:
            self.switch = mode.enable(options)

    @property
    def reference_mode_off(self) -> Optional[bool]:
        """True: the reference ran with the mode off; False: the mode has no switch-off; None: nothing to switch."""
        if self.switch is not None:
            return self.switch.off is not None
        return True if self._apply else None

    @contextlib.contextmanager
    def off(self) -> Iterator[None]:
        if self.switch is not None and self.switch.off is not None:
            self.switch.off()
            try:
                yield
            finally:
                if self.switch.on is not None:
                    self.switch.on()
        elif self.switch is None and self._restore is not None:
            self._restore()
            try:
                yield
            finally:
                self._restore = self._apply()
        else:
            yield


def _sha256(t) -> str:
    """SHA-256 of a tensor's bytes, read straight from host memory: numpy is not a dependency."""
    host = t.detach().contiguous().cpu()
    return hashlib.sha256(ctypes.string_at(host.data_ptr(), host.numel() * host.element_size())).hexdigest()


def measure_candidate(impl, params, shape, spec: ChildSpec, device, mode_off: Callable, progress: Progress):
    """Probes, accuracy and latency of one built candidate, as the report's CandidateResult."""
    import torch

    from adaln_bench.harness import plan as P
    from adaln_bench.harness.accuracy import measure_accuracy
    from adaln_bench.harness.inputs import make_temb
    from adaln_bench.harness.probes import probe_batch_invariance
    from adaln_bench.harness.timing import time_call
    from adaln_bench.harness.workload import Workload
    from adaln_bench.reports.schema import AccuracyLatency, CandidateResult, Fingerprint

    plan = P.QUICK if spec.quick else P.FULL
    workload = Workload(impl, params, shape, device)
    started = time.monotonic()

    progress.phase("fingerprint")
    fp_run = workload(P.FINGERPRINT_SEED, P.FINGERPRINT_ROWS, range(P.FINGERPRINT_ROWS))
    fingerprint = Fingerprint(rows=P.FINGERPRINT_ROWS, seed=P.FINGERPRINT_SEED, output_sha256=_sha256(fp_run.out),
                              d_temb_sha256=None if fp_run.d_temb is None else _sha256(fp_run.d_temb))
    del fp_run

    invariance = None
    if spec.probes:
        progress.phase("batch invariance")
        invariance = probe_batch_invariance(workload, plan, progress.tick)
    del workload

    table: dict[str, AccuracyLatency] = {}
    for tokens in plan.accuracy_sizes:
        progress.phase(f"accuracy and latency, T={tokens}")
        fwd_err, grad_err = (None, None)
        if spec.accuracy:
            fwd_err, grad_err = measure_accuracy(impl, params, shape, device, tokens, mode_off)
        entry = AccuracyLatency(fwd_rel_err=fwd_err, grad_rel_err=grad_err, fwd_us=None)
        if spec.latency:
            temb = make_temb(tokens, shape, P.ACCURACY_SEED, device)

            def forward() -> None:
                with torch.no_grad():
                    impl.forward(temb, params.weight, params.bias)

            fwd, clock = time_call(forward, device)
            entry = AccuracyLatency(fwd_rel_err=fwd_err, grad_rel_err=grad_err, fwd_us=fwd.median,
                                    fwd_us_dist=fwd, clock=clock)
            if impl.has_backward:
                ones = torch.ones((tokens, shape.out_features), dtype=torch.bfloat16, device=device)

                def step() -> None:
                    t = temb.detach().requires_grad_()
                    w = params.weight.detach().requires_grad_()
                    b = params.bias.detach().requires_grad_()
                    impl.forward(t, w, b).backward(ones)

                fb, _ = time_call(step, device)
                entry.fwd_bwd_us, entry.fwd_bwd_us_dist = fb.median, fb
        table[str(tokens)] = entry
        progress.tick(0)
    return CandidateResult(
        source=impl.source,
        has_backward=impl.has_backward,
        batch_invariance=invariance,
        accuracy_latency=table,
        fingerprint=fingerprint,
        details=dict(impl.details) or None,
        wall_s=round(time.monotonic() - started, 3),
    )


def run_child(spec: ChildSpec) -> ChildResult:
    started = time.monotonic()
    result = ChildResult(mode=spec.mode, status="running")

    entries: dict = {}

    def save() -> None:
        # Assigned, not mutated, so that pydantic counts the field as set and writes it.
        result.candidates = dict(entries)
        result.wall_s = round(time.monotonic() - started, 3)
        write_text_atomic(result.model_dump_json(exclude_unset=True, indent=1), spec.result_path)

    import torch

    from adaln_bench.harness.environment import torch_environment
    from adaln_bench.harness.inputs import make_params
    from adaln_bench.harness.probes import planned_runs
    from adaln_bench.harness import plan as P
    from adaln_bench.harness.shapes import Shape
    from adaln_bench.kernels import registry as candidates
    from adaln_bench.kernels.registry import BuildContext
    from adaln_bench.modes import observe
    from adaln_bench.modes.registry import ModeOptions, all_modes
    from adaln_bench.reports.schema import CandidateUnavailable

    from adaln_bench.harness.input_fingerprint import input_fingerprint
    from adaln_bench.harness.mode_environment import runtime_environment

    mode = all_modes(spec.modes_file)[spec.mode]
    result.runtime = runtime_environment(mode)  # before the switch: an unavailable mode still says where it ran
    device = torch.device(spec.device)
    if device.type == "cuda":
        torch.cuda.set_device(0)
    before = observe.dispatch_snapshot()
    try:
        switch = ModeSwitch(mode, ModeOptions(megatron_src=spec.megatron_src), device.type == "cuda")
    except Exception as exc:  # any failure to switch on makes the mode unavailable, with the reason
        result.status, result.reason = "unavailable", f"{type(exc).__name__}: {exc}"
        result.observed = observe.observe(mode, before, None)
        result.complete = True
        traceback.print_exc()
        save()
        return result
    result.observed = observe.observe(mode, before, switch.switch)
    result.observed.reference_mode_off = switch.reference_mode_off
    result.environment = torch_environment(spec.device)
    result.environment.mode_environment = {mode.name: dict(mode.env)}
    if switch.switch is not None and "megatron_source_commit" in switch.switch.notes:
        result.environment.megatron_source_commit = switch.switch.notes["megatron_source_commit"]
    if spec.check_only:
        result.status, result.complete = "ok", True
        save()
        return result
    save()

    shape = Shape(spec.shape.dim, spec.shape.hidden, spec.shape.modalities, spec.shape.preset)
    params = make_params(shape, device)
    result.inputs = input_fingerprint(shape, params, device)
    save()
    plan = P.QUICK if spec.quick else P.FULL
    ctx = BuildContext(mode=spec.mode, device=device, dim=shape.dim, hidden=shape.hidden, modalities=shape.modalities)
    for name in spec.candidates:
        candidate = candidates.get(name)
        report_name = candidate.report_name(spec.mode)
        reason = candidate.availability()
        if reason is not None:
            entries[report_name] = CandidateUnavailable(unavailable=reason, status="unavailable")
            save()
            continue
        progress = Progress(report_name, planned_runs(plan) if spec.probes else 0)
        try:
            impl = candidate.build(ctx)
        except Exception as exc:
            traceback.print_exc()
            entries[report_name] = CandidateUnavailable(
                unavailable=f"build failed: {type(exc).__name__}: {exc}", status="failed")
            save()
            continue
        try:
            entries[report_name] = measure_candidate(impl, params, shape, spec, device, switch.off, progress)
        except Exception as exc:
            traceback.print_exc()
            entries[report_name] = CandidateUnavailable(
                unavailable=f"measurement failed: {type(exc).__name__}: {exc}", status="failed")
        del impl
        if device.type == "cuda":
            torch.cuda.empty_cache()
        save()
    result.status, result.complete = "ok", True
    save()
    return result


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m adaln_bench.harness.child SPEC.json", file=sys.stderr)
        return 2
    spec = ChildSpec.model_validate_json(Path(argv[1]).read_text(encoding="utf-8"))
    os.environ.setdefault("ADALN_BENCH_CHILD", "1")
    run_child(spec)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
