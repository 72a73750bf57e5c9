"""What a mode's child measures once its mode is on: every operator it claims, each candidate built, measured and
its cold start checked, every step under the GPU lease (harness/measurement/step_clock.py), every operator under
a reservation of the GPU's memory (harness/processes/memory_ledger.py), taken in the order
harness/processes/next_operator.py gives.

The cold-start checks run in a small pool beside the next candidates (`RunConfig.cold_start_pool`) where the
schedule planned room for them (`RunConfig.cold_start_beside`); otherwise, and on a CPU, each runs at once, in this
thread. Results are written by this thread and the pool's, so both take `ChildState.lock` to change them or to
save.
"""
from __future__ import annotations

import gc
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Callable, Optional

from adaln_bench.harness.processes.candidate_run import cold_start_of, cold_start_path, measure_one, report_name
from adaln_bench.harness.processes.gpu_lease import lease_for
from adaln_bench.harness.processes.memory_ledger import ledger_for, operator_reservation, rows_reservation
from adaln_bench.harness.processes.next_operator import OperatorQueue
from adaln_bench.harness.processes.protocol import ChildSpec
from adaln_bench.harness.measurement.step_clock import BUILD, COLD_START, StepClock


def _cuda_sync() -> None:
    import torch

    if torch.cuda.is_initialized():
        torch.cuda.synchronize()


# An operator's leftover reservation from which the child's log lists what holds it.
RESIDUAL_LOGGED_BYTES = 1 << 30


def clock_for(spec: ChildSpec) -> StepClock:
    """The child's steps under its GPU's lease (none on a CPU, or where the spec names none)."""
    sync = _cuda_sync if spec.config.device == "cuda" else (lambda: None)
    return StepClock(lease_for(spec.lease_dir, spec.lease_key), serial=spec.config.serial, sync=sync)


class ChildState:
    """The child's results, the lock that guards them, and `save` (which the caller provides)."""

    def __init__(self, save: Callable[[], None]):
        self.lock = threading.RLock()
        self._save = save

    def save(self) -> None:
        with self.lock:
            self._save()


class ColdStartPool:
    """Cold-start checks `size` at a time beside the caller; not `beside`: each in the calling thread, before
    `submit` returns."""

    def __init__(self, size: int, beside: bool):
        self._pool = ThreadPoolExecutor(size, thread_name_prefix="adaln-bench-cold") if beside else None
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
    from adaln_bench.ops.registry import get_operator

    on_gpu = device.type == "cuda"
    pool = ColdStartPool(spec.config.cold_start_pool if on_gpu else 1, beside=on_gpu and spec.config.cold_start_beside)
    ledger = ledger_for(spec.lease_dir, spec.lease_key, spec.config.memory_budget_bytes)
    # Memory is taken before any lease (memory_ledger.py); the queue skips what another part of the mode claimed.
    parts = spec.config.parts
    latency_only = not (parts.probes or parts.accuracy)  # a --repeat process: the timed sizes only
    def reservation_of(op: str) -> int:
        return operator_reservation(get_operator(op), spec.config.shape, spec.config.quick, latency_only)

    queue = OperatorQueue(spec.work, reservation_of, ledger, spec.claims_dir, spec.claimant or spec.mode)
    try:
        index = 0
        while (taken := queue.take()) is not None:
            try:
                clock.add(BUILD, waited=taken.waited_s)
                _say_if_alone(ledger, taken.work.op, reservation_of(taken.work.op), device)
                index = _measure_operator(spec, get_operator(taken.work.op), taken.work, device, switch, results,
                                          inputs, state, forks, clock, pool, index, ledger)
            finally:
                queue.done(taken)
    finally:
        pool.close()


def _say_if_alone(ledger, op: str, nbytes: int, device) -> None:
    """A reservation past the budget runs alone (memory_ledger.py): its log says how much of the GPU was free
    when it began, the first thing to read if it runs out of memory."""
    budget = getattr(ledger, "budget_bytes", None)
    if device.type != "cuda" or budget is None or nbytes <= budget:
        return
    import sys

    import torch

    free, total = torch.cuda.mem_get_info(device)
    print(f"adaln-bench: {op} runs alone: it reserves {nbytes / 2**30:.1f} GiB, past the budget's "
          f"{budget / 2**30:.1f}; {free / 2**30:.1f} of {total / 2**30:.1f} GiB free now", file=sys.stderr, flush=True)


def _measure_operator(spec: ChildSpec, op, work, device, switch, results: dict, inputs: dict, state: ChildState,
                      forks, clock: StepClock, pool: ColdStartPool, index: int, ledger) -> int:
    """Every candidate of one operator; the next candidate index. Frees what it allocated before it returns, so
    that the operator's memory reservation covers it."""
    import torch

    from adaln_bench.datamodel.schema import CandidateResult
    from adaln_bench.harness.measurement.input_fingerprint import input_fingerprint
    from adaln_bench.ops.draws import draw_params

    if device.type == "cuda":  # from here the allocator's peak is this operator's (clock.peak, below)
        torch.cuda.reset_peak_memory_stats()
    with clock.step(BUILD):
        params = draw_params(op, spec.config.shape, device)
        fingerprint = input_fingerprint(op, spec.config.shape, params, device)
    with state.lock:
        entries = results.setdefault(op.name, {})
        inputs[op.name] = fingerprint
    state.save()
    for name in work.candidates:
        measured = measure_one(spec, op, name, params, switch, clock)
        with state.lock:
            entries[report_name(op.name, name, spec.mode)] = measured
        state.save()
        if spec.config.parts.probes and spec.config.cold_start and isinstance(measured, CandidateResult):
            _check_cold_start(spec, op, name, index, forks, clock, pool, measured, state, ledger)
        index += 1
        if device.type == "cuda":
            torch.cuda.empty_cache()
    del params
    if device.type == "cuda":
        clock.peak(op.name, int(torch.cuda.max_memory_reserved()))
        gc.collect()  # tensors held only by reference cycles go before the cache is emptied
        torch.cuda.empty_cache()
        left = int(torch.cuda.memory_reserved())
        clock.residual(op.name, left)
        if left >= RESIDUAL_LOGGED_BYTES:
            _log_live_tensors(op.name, left)
    return index


def live_tensor_groups(keep=lambda t: t.is_cuda, top: int = 5) -> list[tuple[tuple, str, int, int]]:
    """The largest groups of live tensors (those `keep` picks) reachable from Python: (shape, dtype, how many,
    bytes), by bytes."""
    import torch

    groups: dict[tuple, list[int]] = {}
    for obj in gc.get_objects():
        try:
            if issubclass(type(obj), torch.Tensor) and keep(obj):  # type(): no module's deprecation hook
                count_bytes = groups.setdefault((tuple(obj.shape), str(obj.dtype).replace("torch.", "")), [0, 0])
                count_bytes[0] += 1
                count_bytes[1] += obj.untyped_storage().nbytes()
        except Exception:  # noqa: BLE001 - an object that is not what it says: not ours to explain
            continue
    ranked = sorted(groups.items(), key=lambda kv: -kv[1][1])[:top]
    return [(shape, dtype, n, nbytes) for (shape, dtype), (n, nbytes) in ranked]


def _log_live_tensors(op: str, reserved: int) -> None:
    """What still holds memory after an operator, in the child's log (the ledger counts it as free again)."""
    import sys

    listed = "; ".join(f"{n} x {list(shape)} {dtype} ({b / 2**30:.2f} GiB)"
                       for shape, dtype, n, b in live_tensor_groups())
    print(f"adaln-bench: after {op} this process still reserves {reserved / 2**30:.1f} GiB; live CUDA tensors: "
          f"{listed or 'none reachable from Python'}", file=sys.stderr, flush=True)


def _check_cold_start(spec: ChildSpec, op, name: str, index: int, forks, clock: StepClock,
                      pool: ColdStartPool, measured, state: ChildState, ledger) -> None:
    """The candidate's cold-start check, now or in the pool; its entry gets the result when it ends."""
    from adaln_bench.harness.processes.cold_start import TOKENS

    def check():
        # Not beside another child's operator that runs alone (memory_ledger.py): wait for it, then start.
        asked, nbytes = clock.now(), rows_reservation(op, spec.config.shape, TOKENS)
        while (token := ledger.try_check(nbytes)) is None:
            time.sleep(ledger.poll_s)
        clock.add(COLD_START, waited=clock.now() - asked)
        try:
            # The check takes the lease itself, after its imports (harness/processes/cold_start.py); its whole
            # process counts as the phase, its waits and exclusive seconds as its own clock counted them.
            started = clock.now()
            result = cold_start_of(spec, op.name, name, index, forks)
            clock.absorb(COLD_START, clock.now() - started, _check_times(spec, index))
            return result
        finally:
            ledger.release(token)

    def done(result) -> None:
        with state.lock:
            measured.cold_start = result
        state.save()

    pool.submit(check, done)


def _check_times(spec: ChildSpec, index: int):
    """The step times a cold-start check left; None where it left none (it died first)."""
    from adaln_bench.harness.processes.cold_start import times_path
    from adaln_bench.harness.measurement.step_clock import StepTimes

    try:
        return StepTimes.model_validate_json(times_path(str(cold_start_path(spec, index))).read_text("utf-8"))
    except (OSError, ValueError):
        return None


def peak_memory_bytes(device, by_op: dict) -> Optional[int]:
    """The most this process's allocator reserved on its GPU (the peak is reset before each operator, so also
    the most of `by_op`); None on a CPU."""
    if device.type != "cuda":
        return None
    import torch

    return max([int(torch.cuda.max_memory_reserved()), *by_op.values()])
