"""What a mode's child measures once its mode is on: every operator it claims, each candidate built, measured and
its cold start checked, every step under the GPU lease (harness/measurement/step_clock.py).

The cold-start checks run in a small pool beside the next candidates (`ChildSpec.cold_start_pool`); with a pool
of one each runs at once, in this thread, as it always did. Results are written by this thread and the pool's,
so both take `ChildState.lock` to change them or to save.
"""
from __future__ import annotations

import threading
import traceback
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Callable, Optional

from adaln_bench.harness.processes.gpu_lease import lease_for
from adaln_bench.harness.processes.protocol import ChildSpec, ProgressWriter
from adaln_bench.harness.measurement.step_clock import BUILD, COLD_START, StepClock


def _cuda_sync() -> None:
    import torch

    if torch.cuda.is_initialized():
        torch.cuda.synchronize()


def clock_for(spec: ChildSpec) -> StepClock:
    """The child's steps under its GPU's lease (none on a CPU, or where the spec names none)."""
    sync = _cuda_sync if spec.device == "cuda" else (lambda: None)
    return StepClock(lease_for(spec.lease_dir, spec.lease_key), serial=spec.serial, sync=sync)


class ChildState:
    """The child's results, the lock that guards them, and `save` (which the caller provides)."""

    def __init__(self, save: Callable[[], None]):
        self.lock = threading.RLock()
        self._save = save

    def save(self) -> None:
        with self.lock:
            self._save()


class ColdStartPool:
    """Cold-start checks `size` at a time; `size` 1: each in the calling thread, before `submit` returns."""

    def __init__(self, size: int):
        self._pool = ThreadPoolExecutor(size, thread_name_prefix="adaln-bench-cold") if size > 1 else None
        self._pending: list[Future] = []

    def submit(self, check: Callable[[], object], done: Callable[[object], None]) -> None:
        if self._pool is None:
            done(check())
            return
        self._pending.append(self._pool.submit(lambda: done(check())))

    def close(self) -> None:
        """Wait for every check; a check's own failure is its result, so an exception here is a bug: raised."""
        if self._pool is None:
            return
        try:
            for future in self._pending:
                future.result()
        finally:
            self._pool.shutdown(wait=True)


def measure_all(spec: ChildSpec, device, switch, results: dict, inputs: dict, state: ChildState, forks,
                clock: StepClock) -> None:
    import torch

    from adaln_bench.harness.processes.claims import claim
    from adaln_bench.harness.measurement.input_fingerprint import input_fingerprint
    from adaln_bench.ops.draws import draw_params
    from adaln_bench.ops.registry import get_operator
    from adaln_bench.datamodel.schema import CandidateResult

    pool = ColdStartPool(spec.cold_start_pool if device.type == "cuda" else 1)
    try:
        index = 0
        for work in spec.work:
            if spec.claims_dir is not None and not claim(spec.claims_dir, work.op, spec.claimant or spec.mode):
                continue  # another part of this mode measures it
            op = get_operator(work.op)
            with clock.step(BUILD):
                params = draw_params(op, spec.shape, device)
                fingerprint = input_fingerprint(op, spec.shape, params, device)
            with state.lock:
                entries = results.setdefault(op.name, {})
                inputs[op.name] = fingerprint
            state.save()
            for name in work.candidates:
                report_name = _report_name(op.name, name, spec.mode)
                measured = measure_one(spec, op, name, params, switch, index, forks, clock)
                with state.lock:
                    entries[report_name] = measured
                state.save()
                if spec.probes and spec.cold_start and isinstance(measured, CandidateResult):
                    _check_cold_start(spec, op.name, name, index, forks, clock, pool, measured, state)
                index += 1
                if device.type == "cuda":
                    torch.cuda.empty_cache()
            del params
    finally:
        pool.close()


def _check_cold_start(spec: ChildSpec, op: str, name: str, index: int, forks, clock: StepClock,
                      pool: ColdStartPool, measured, state: ChildState) -> None:
    """The candidate's cold-start check, now or in the pool; its entry gets the result when it ends."""

    def check():
        # The check takes the lease itself, after its imports (harness/processes/cold_start.py); its whole process
        # counts as the phase, its waits and exclusive seconds as its own clock counted them.
        started = clock.now()
        result = cold_start_of(spec, op, name, index, forks)
        clock.absorb(COLD_START, clock.now() - started, _check_times(spec, index))
        return result

    def done(result) -> None:
        with state.lock:
            measured.cold_start = result
        state.save()

    pool.submit(check, done)


def _report_name(op: str, name: str, mode: str) -> str:
    from adaln_bench.ops import candidates

    return candidates.get(name, op).report_name(mode)


def measure_one(spec: ChildSpec, op, name: str, params: dict, switch, index: int, forks, clock: StepClock):
    """One candidate of one operator: built and measured; or why it could not be."""
    import torch

    from adaln_bench.harness.measurement.measure import Parts, measure_candidate
    from adaln_bench.harness.measurement.probes import planned_runs
    from adaln_bench.harness.measurement.subject import Subject
    from adaln_bench.ops import candidates
    from adaln_bench.ops.candidates import BuildContext
    from adaln_bench.datamodel.schema import CandidateUnavailable

    device = torch.device(spec.device)
    candidate = candidates.get(name, op.name)
    report_name = candidate.report_name(spec.mode)
    reason = candidate.availability()
    if reason is not None:
        return CandidateUnavailable(unavailable=reason, status="unavailable")
    plan = op.family.plan(spec.quick)
    label = report_name if len(spec.work) == 1 else f"{op.name}/{report_name}"
    progress = ProgressWriter(label, planned_runs(plan) if spec.probes else 0)
    try:
        with clock.step(BUILD):
            impl = candidate.build(BuildContext(mode=spec.mode, device=device, shape=spec.shape, op=op.name))
    except Exception as exc:
        traceback.print_exc()
        return CandidateUnavailable(unavailable=f"build failed: {type(exc).__name__}: {exc}", status="failed")
    parts = Parts(probes=spec.probes, accuracy=spec.accuracy, latency=spec.latency)
    try:
        measured = measure_candidate(Subject.of(op, candidate, impl, spec.shape), params, spec.shape, device, plan,
                                     parts, switch.off, progress, clock)
    except Exception as exc:
        traceback.print_exc()
        return CandidateUnavailable(unavailable=f"measurement failed: {type(exc).__name__}: {exc}", status="failed")
    if spec.probes and spec.cold_start:  # a latency-only repeat does not need it again
        progress.phase("cold start")  # queued: it runs now, or in the pool beside the next candidates
    return measured


def _cold_start_result(spec: ChildSpec, index: int) -> Path:
    # Named after this child's result file: two parts of one mode run side by side in one folder.
    return Path(spec.result_path).with_name(f"{Path(spec.result_path).stem}.cold-start.{index}.json")


def _check_times(spec: ChildSpec, index: int):
    """The step times a cold-start check left; None where it left none (it died first)."""
    from adaln_bench.harness.processes.cold_start import times_path
    from adaln_bench.harness.measurement.step_clock import StepTimes

    try:
        return StepTimes.model_validate_json(times_path(str(_cold_start_result(spec, index))).read_text("utf-8"))
    except (OSError, ValueError):
        return None


def cold_start_of(spec: ChildSpec, op: str, candidate: str, index: int, forks=None):
    """The candidate's cold-start check (harness/processes/cold_start.py), in a process of its own beside this one:
    forked from `forks` where there is one, else a new interpreter."""
    from adaln_bench.harness.processes.cold_start import TIMEOUT_S, ColdStartSpec, check_cold_start, in_new_interpreter

    cold = ColdStartSpec(mode=spec.mode, modes_file=spec.modes_file, megatron_src=spec.megatron_src, op=op,
                         candidate=candidate, device=spec.device, shape=spec.shape,
                         draw_geometry=spec.draw_geometry, result_path=str(_cold_start_result(spec, index)),
                         lease_dir=spec.lease_dir, lease_key=spec.lease_key, serial=spec.serial)
    return check_cold_start(cold, TIMEOUT_S, forks.launch if forks is not None else in_new_interpreter)


def peak_memory_bytes(device) -> Optional[int]:
    """The most this process's allocator reserved on its GPU; None on a CPU."""
    if device.type != "cuda":
        return None
    import torch

    return int(torch.cuda.max_memory_reserved())
