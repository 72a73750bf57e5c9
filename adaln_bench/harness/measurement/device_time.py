"""Device time of a callable on CUDA: GPU time only, without the host's launch time (issue 9).

The CUDA-event figures of docs/spec.md#6-latency time one call between two events, so they hold whatever the host loses
between launches; at small T that is most of the figure, and it moves between processes. Here:

- `cuda_graph` (Triton's do_bench_cudagraph idea): enough calls to span about 2 ms are captured in one
  CUDA graph; each sample is one replay between two events, divided by the calls in the graph. The host
  issues one launch per sample, so its time falls outside the span.
- `queued` (nvbench's cold measurement), for a callable that cannot be captured: a spinning kernel
  (`torch.cuda._sleep`) is enqueued first, then the start event, the calls and the end event. The host
  enqueues every call while the GPU spins, so the calls run back to back and the span holds GPU time
  only. A sample whose enqueueing took longer than the spin is thrown away and the spin lengthened.

Before the first kept sample the callable is run for at least `StopRule.warmup_ms` of its own GPU time and
those samples are dropped: right after other work (the harness's FP64 reference, its event timing, the
probes) the H200 ran the bundled forward at T = 1 about 15 % slower for up to ~70 ms (134.6 against 117-120
µs), and a measurement that started there read slow in all its samples (git:NOTES.md §5 item 6).

Either way samples are taken until the relative noise of their median (the half-width of its
distribution-free 95 % interval over the median) is at most 0.5 %, or a cap on samples or seconds is
reached; the estimate and the reason sampling stopped are recorded. The SM clock is read before and after
(NVML when pynvml imports, else measured with the spinning kernel, whose length is counted in SM cycles),
and `throttled` says when it dropped.

The sampling logic is pure and takes its timer from the caller, so it is tested on the CPU; the CUDA part
is in `GraphSampler`, `_QueuedSampler` and `measure_device_time`. On the CPU `measure_device_time`
returns None: there is no device time to take.
"""
from __future__ import annotations

import math
import random
import time
from dataclasses import dataclass, field
from typing import Callable, Literal, Optional, Protocol, Sequence

# median_ratio and paired_ratios live with the other statistics; measurers import them from here too.
from adaln_bench.datamodel.stats import median, median_ratio, paired_ratios  # noqa: F401

Method = Literal["cuda_graph", "queued"]
METHODS: tuple[str, ...] = ("cuda_graph", "queued")

# One sample should span about 2 ms of GPU time: long against the events' ~0.5 µs resolution and the
# gaps between replays, short enough for hundreds of samples in a second.
TARGET_SPAN_US = 2000.0
MAX_CALLS_PER_SAMPLE = 256
# The two-sided normal quantile of the median's 95 % interval.
Z_95 = 1.959964
# A drop of the SM clock by more than this fraction between the first and the last sample is throttling;
# NVML reports clocks in steps of about 15 MHz (under 1 % of a boost clock).
CLOCK_DROP_TOLERANCE = 0.02
# Cycles of the spin kernel used to measure the SM clock (about 0.5 ms at 2 GHz).
CLOCK_PROBE_CYCLES = 1_000_000


class DeviceTimeError(RuntimeError):
    """Device time was asked for where it cannot be taken (no CUDA, an unknown method)."""


# GPU time each callable runs before its first kept sample: about 3x the longest slow spell seen (~70 ms).
WARMUP_MS = 200.0


@dataclass(frozen=True)
class StopRule:
    """When to start keeping samples (after `warmup_ms` of the callable's GPU time) and when to stop: noise at
    most `target`, or a cap reached (checked every `batch` samples)."""

    target: float = 0.005
    min_samples: int = 20
    max_samples: int = 500
    max_seconds: float = 5.0
    batch: int = 10
    warmup_ms: float = WARMUP_MS


StopReason = Literal["stable", "max_samples", "max_seconds"]


@dataclass(frozen=True)
class Sampling:
    samples_us: list[float]
    rel_noise: float
    stop_reason: StopReason


@dataclass(frozen=True)
class DeviceTiming:
    """One callable's device time in one process."""

    method: Method
    median_us: float
    samples_us: list[float]
    rel_noise: float
    stop_reason: StopReason
    calls_per_sample: int
    sm_clock_mhz_before: Optional[float]
    sm_clock_mhz_after: Optional[float]
    sm_clock_source: Optional[str]
    throttled: Optional[bool]
    # Why the callable could not be captured in a graph, when `method` is "queued" for that reason.
    capture_error: Optional[str] = None
    notes: list[str] = field(default_factory=list)
    # The samples dropped before the first kept one, and the GPU time they were to span (StopRule.warmup_ms).
    warmup_samples_us: list[float] = field(default_factory=list)
    warmup_ms: float = 0.0


# --- pure parts --------------------------------------------------------------------------------------


def relative_noise(samples: Sequence[float]) -> float:
    """Half-width of the distribution-free 95 % interval of the median, over the median.

    The interval runs between the order statistics of ranks n/2 ∓ z·√n/2 (the binomial interval of the
    median), so it needs no assumption on the shape of the distribution: a long tail of slow samples
    widens it only as far as it moves the middle. Infinite below 5 samples, where it means nothing.
    """
    n = len(samples)
    if n < 5:
        return math.inf
    s = sorted(samples)
    half = Z_95 * math.sqrt(n) / 2.0
    lo = max(1, math.floor(n / 2.0 - half))
    hi = min(n, math.ceil(1.0 + n / 2.0 + half))
    mid = median(s)
    if mid <= 0:
        return math.inf
    return (s[hi - 1] - s[lo - 1]) / 2.0 / mid


def warm_up(takers: dict[str, Callable[[int], list[float]]], calls: dict[str, int], rule: StopRule
            ) -> dict[str, list[float]]:
    """Samples taken and dropped, `rule.batch` at a time for each callable in turn, until each has run for
    `rule.warmup_ms` of its own GPU time (a sample is µs per call over `calls[name]` calls), or
    `rule.max_samples` samples. Returns what each dropped."""
    dropped: dict[str, list[float]] = {name: [] for name in takers}
    need_us = rule.warmup_ms * 1e3
    while True:
        pending = [name for name, got in dropped.items()
                   if sum(got) * calls[name] < need_us and len(got) < rule.max_samples]
        if not pending:
            return dropped
        for name in pending:
            dropped[name] += takers[name](rule.batch)


def sample_until_stable(take: Callable[[int], list[float]], rule: StopRule = StopRule(),
                        clock: Callable[[], float] = time.monotonic) -> Sampling:
    """Call `take(k)` (k fresh samples, µs) until the noise is within `rule.target` or a cap is reached."""
    if rule.min_samples < 5 or rule.batch < 1 or rule.max_samples < rule.min_samples:
        raise ValueError(f"unusable stop rule: {rule}")
    started = clock()
    samples: list[float] = list(take(rule.min_samples))
    while True:
        noise = relative_noise(samples)
        if noise <= rule.target:
            return Sampling(samples, noise, "stable")
        if len(samples) >= rule.max_samples:
            return Sampling(samples, noise, "max_samples")
        if clock() - started >= rule.max_seconds:
            return Sampling(samples, noise, "max_seconds")
        samples.extend(take(min(rule.batch, rule.max_samples - len(samples))))


def sample_interleaved(takers: dict[str, Callable[[int], list[float]]], rule: StopRule = StopRule(),
                       clock: Callable[[], float] = time.monotonic) -> dict[str, Sampling]:
    """Several callables sampled in turn, `rule.batch` samples each per round (in a shuffled order), so that a
    clock that drifts under sustained load (the H200's drops by up to 25 % at large T) moves all of them
    alike. Rounds go on until every one is stable (after `min_samples`), or one reaches `max_samples`, or
    `max_seconds` (for the whole set) pass; each gets the stop reason of the set."""
    samples: dict[str, list[float]] = {name: [] for name in takers}
    # Each round in a new (seeded) order: in a fixed order every subject would always follow the same one,
    # and the clock's answer to that one's load (the H200 showed ±10 % between two libraries running
    # identical forward code at T = 2048) would stay with it as a bias instead of averaging out.
    order, shuffle = list(takers), random.Random(0).shuffle
    started = clock()
    while True:
        shuffle(order)
        for name in order:
            samples[name] += takers[name](rule.batch)
        n = min(len(v) for v in samples.values())
        noise = {name: relative_noise(v) for name, v in samples.items()}
        reason: Optional[StopReason] = None
        if n >= rule.min_samples and all(x <= rule.target for x in noise.values()):
            reason = "stable"
        elif n >= rule.max_samples:
            reason = "max_samples"
        elif clock() - started >= rule.max_seconds:
            reason = "max_seconds"
        if reason is not None:
            return {name: Sampling(samples[name], noise[name], reason) for name in takers}


def calls_for_span(one_call_us: float, target_span_us: float = TARGET_SPAN_US,
                   max_calls: int = MAX_CALLS_PER_SAMPLE) -> int:
    """How many calls one sample holds so that it spans about `target_span_us` of GPU time."""
    if not one_call_us > 0:
        return max_calls
    return max(1, min(max_calls, math.ceil(target_span_us / one_call_us)))


def clock_dropped(before: Optional[float], after: Optional[float],
                  tolerance: float = CLOCK_DROP_TOLERANCE) -> Optional[bool]:
    """True when the SM clock fell by more than `tolerance` of its first reading; None when unknown."""
    if before is None or after is None or before <= 0:
        return None
    return after < before * (1.0 - tolerance)


class Sampler(Protocol):
    """A way of taking device-time samples of one callable, each the time per call in µs."""

    method: Method
    calls: int
    notes: list[str]

    def take(self, k: int) -> list[float]: ...


def run_measurement(fn: Callable[[], object], method: str, rule: StopRule,
                    make_graph: Callable[[Callable[[], object]], Sampler],
                    make_queued: Callable[[Callable[[], object]], Sampler],
                    read_clock: Callable[[], tuple[Optional[float], Optional[str]]],
                    clock: Callable[[], float] = time.monotonic) -> DeviceTiming:
    """Choose the sampler (a graph unless capture raises, or `method` says queued), sample, read the clock."""
    if method not in ("auto",) + METHODS:
        raise DeviceTimeError(f"unknown device-time method {method!r}; known: auto, {', '.join(METHODS)}")
    capture_error = None
    sampler: Optional[Sampler] = None
    if method in ("auto", "cuda_graph"):
        try:
            sampler = make_graph(fn)
        except Exception as exc:  # anything capture refuses: a host sync, an allocation it cannot record
            if method == "cuda_graph":
                raise
            capture_error = f"{type(exc).__name__}: {exc}".strip()[:500]
    if sampler is None:
        sampler = make_queued(fn)
    dropped = warm_up({"fn": sampler.take}, {"fn": sampler.calls}, rule)["fn"]
    before, source = read_clock()
    sampling = sample_until_stable(sampler.take, rule, clock)
    after, _ = read_clock()
    return DeviceTiming(
        method=sampler.method, median_us=median(sampling.samples_us), samples_us=sampling.samples_us,
        rel_noise=sampling.rel_noise, stop_reason=sampling.stop_reason, calls_per_sample=sampler.calls,
        sm_clock_mhz_before=before, sm_clock_mhz_after=after, sm_clock_source=source,
        throttled=clock_dropped(before, after), capture_error=capture_error, notes=list(sampler.notes),
        warmup_samples_us=dropped, warmup_ms=rule.warmup_ms)


# --- CUDA ----------------------------------------------------------------------------------------------


def _event_pairs(k: int):
    import torch

    return [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(k)]


class GraphSampler:
    """`calls` calls captured in one CUDA graph; a sample is one replay between two events."""

    method: Method = "cuda_graph"

    def __init__(self, fn: Callable[[], object], warmup: int = 3):
        import torch

        from adaln_bench.harness.measurement.cuda_capture import shared_pool

        self.notes: list[str] = []
        # Warm up on a side stream, as torch asks before a capture: lazy init, autotuning, allocator growth.
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(warmup):
                fn()
        torch.cuda.current_stream().wait_stream(side)
        torch.cuda.synchronize()
        self.fn, self.calls = fn, 1
        self._pool = shared_pool()  # the second capture reuses the first's memory
        self.graph = self._capture(1)
        one = median(self._replay(5))
        calls = calls_for_span(one)
        if calls > 1:
            del self.graph
            self.calls = calls
            self.graph = self._capture(calls)
        self._replay(2)  # the first replays of a fresh graph upload it

    def _capture(self, calls: int):
        import torch

        from adaln_bench.harness.measurement.cuda_capture import pool_id, recovered_on_failure

        graph = torch.cuda.CUDAGraph()
        device = torch.device("cuda", torch.cuda.current_device())
        # A capture the candidate breaks must not leave the allocator believing it is still under way: the
        # process could then never empty its cache again (cuda_capture.py).
        with recovered_on_failure(graph, self._pool, device):
            with torch.cuda.graph(graph, pool=pool_id(self._pool)):
                for _ in range(calls):
                    self.fn()
        torch.cuda.synchronize()
        return graph

    def _replay(self, k: int) -> list[float]:
        import torch

        pairs = _event_pairs(k)
        for start, end in pairs:
            start.record()
            self.graph.replay()
            end.record()
        torch.cuda.synchronize()
        return [start.elapsed_time(end) * 1e3 / self.calls for start, end in pairs]

    def take(self, k: int) -> list[float]:
        return self._replay(k)


class _QueuedSampler:
    """The calls queued behind a spinning kernel, so that the host's launch time falls outside the span."""

    method: Method = "queued"
    MAX_SPIN_US = 200_000.0

    def __init__(self, fn: Callable[[], object], cycles_per_us: float, warmup: int = 3):
        import torch

        self.notes: list[str] = []
        self.fn, self.cycles_per_us = fn, cycles_per_us
        host_us = []
        for _ in range(warmup):
            t0 = time.perf_counter()
            fn()
            host_us.append((time.perf_counter() - t0) * 1e6)
        torch.cuda.synchronize()
        self.host_us_per_call = max(min(host_us), 1.0)
        self.calls = 1
        self.spin_us = self._spin_for(1)
        one = median(self._take_valid(3))
        self.calls = calls_for_span(one)
        self.spin_us = self._spin_for(self.calls)

    def _spin_for(self, calls: int) -> float:
        # Three times the host's enqueue time of the sample's calls, at least 100 µs.
        return min(self.MAX_SPIN_US, max(100.0, 3.0 * calls * self.host_us_per_call))

    def _one(self) -> Optional[float]:
        """One sample, or None when the host had not finished enqueueing when the spin ended."""
        import torch

        start, end = _event_pairs(1)[0]
        torch.cuda._sleep(int(self.spin_us * self.cycles_per_us))
        start.record()
        t0 = time.perf_counter()
        for _ in range(self.calls):
            self.fn()
        enqueue_us = (time.perf_counter() - t0) * 1e6
        end.record()
        end.synchronize()
        if enqueue_us > 0.8 * self.spin_us:
            return None
        return start.elapsed_time(end) * 1e3 / self.calls

    def _take_valid(self, k: int) -> list[float]:
        out: list[float] = []
        while len(out) < k:
            value = self._one()
            if value is not None:
                out.append(value)
                continue
            if self.spin_us >= self.MAX_SPIN_US:
                raise DeviceTimeError("queued timing: the host could not enqueue the calls within a "
                                      f"{self.MAX_SPIN_US / 1000:g} ms spin (does the callable synchronize?)")
            self.spin_us = min(self.MAX_SPIN_US, self.spin_us * 2)
            self.notes.append(f"spin lengthened to {self.spin_us:.0f} µs")
        return out

    def take(self, k: int) -> list[float]:
        return self._take_valid(k)


def spin_cycles_per_us(cycles: int = CLOCK_PROBE_CYCLES) -> float:
    """The SM clock in MHz as the spinning kernel sees it: cycles counted on the SM over event time."""
    import torch

    result = 0.0
    for _ in range(2):  # the first may include the clock's ramp from idle
        start, end = _event_pairs(1)[0]
        start.record()
        torch.cuda._sleep(cycles)
        end.record()
        end.synchronize()
        result = cycles / (start.elapsed_time(end) * 1e3)
    return result


def read_sm_clock(device) -> tuple[Optional[float], Optional[str]]:
    """The SM clock in MHz and where it came from: NVML (pynvml) when it imports, else the spin kernel."""
    import torch

    try:
        return float(torch.cuda.clock_rate(device)), "nvml"
    except Exception:  # pynvml missing or NVML refusing: measure instead
        pass
    try:
        return spin_cycles_per_us(), "spin_kernel"
    except Exception:
        return None, None


def measure_device_time(fn: Callable[[], object], device, method: str = "auto",
                        rule: StopRule = StopRule()) -> Optional[DeviceTiming]:
    """Device time of `fn` on `device`; None on a CPU device (there is none to take).

    `method` is "auto" (a graph, or queued when capture raises), "cuda_graph" (capture must work) or
    "queued". `fn` must be repeatable: it is called during warm-up, capture and every sample.
    """
    import torch

    device = torch.device(device)
    if device.type != "cuda":
        return None
    if not torch.cuda.is_available():
        raise DeviceTimeError("device time needs CUDA: torch.cuda.is_available() is False here")
    with torch.cuda.device(device):
        torch.cuda.synchronize()

        def queued(f):
            return _QueuedSampler(f, spin_cycles_per_us())

        def graph(f):
            try:
                return GraphSampler(f)
            except Exception:
                try:  # let the failed capture's work drain before the queued fallback starts
                    torch.cuda.synchronize()
                except Exception:
                    pass
                raise

        return run_measurement(fn, method, rule, graph, queued, lambda: read_sm_clock(device))


# --- into the report -------------------------------------------------------------------------------------


def _rounded(samples: Sequence[float]) -> list[float]:
    # Nanoseconds are below the events' resolution; rounding keeps a report of pooled samples small.
    return [round(v, 3) for v in samples]


def _finite(x: float) -> Optional[float]:
    return x if math.isfinite(x) else None  # JSON has no infinity; the schema refuses it


def device_time_entry(fwd: DeviceTiming, fwd_bwd: Optional[DeviceTiming] = None):
    """One process's forward (and forward + backward) device time as the report's DeviceTime."""
    from adaln_bench.datamodel.schema import DeviceTime

    timings = [t for t in (fwd, fwd_bwd) if t is not None]
    befores = [t.sm_clock_mhz_before for t in timings if t.sm_clock_mhz_before is not None]
    afters = [t.sm_clock_mhz_after for t in timings if t.sm_clock_mhz_after is not None]
    flags = [t.throttled for t in timings if t.throttled is not None]
    errors = [t.capture_error for t in timings if t.capture_error]
    entry = DeviceTime(
        method=fwd.method, fwd_us=round(fwd.median_us, 3), fwd_samples=_rounded(fwd.samples_us),
        fwd_rel_noise=_finite(fwd.rel_noise), fwd_process_medians=[round(fwd.median_us, 3)], processes=1,
        sm_clock_mhz_before=min(befores) if befores else None, sm_clock_mhz_after=min(afters) if afters else None,
        sm_clock_source=next((t.sm_clock_source for t in timings if t.sm_clock_source), None),
        throttled=any(flags) if flags else None, capture_error=errors[0] if errors else None,
        warmup_ms=fwd.warmup_ms)
    if fwd_bwd is not None:
        entry.fwd_bwd_us = round(fwd_bwd.median_us, 3)
        entry.fwd_bwd_samples = _rounded(fwd_bwd.samples_us)
        entry.fwd_bwd_rel_noise = _finite(fwd_bwd.rel_noise)
        entry.fwd_bwd_process_medians = [round(fwd_bwd.median_us, 3)]
        entry.fwd_bwd_method = fwd_bwd.method
    return entry


def measure_interleaved(fns: dict[str, Callable[[], object]], device,
                        rule: StopRule = StopRule()) -> dict[str, DeviceTiming]:
    """Device time of several callables on `device`, each captured in its own CUDA graph and the graphs
    replayed in turn (`sample_interleaved`): times to compare with each other, taken under the same clock."""
    import torch

    device = torch.device(device)
    if device.type != "cuda" or not torch.cuda.is_available():
        raise DeviceTimeError("interleaved device time needs CUDA")
    with torch.cuda.device(device):
        samplers = {name: GraphSampler(fn) for name, fn in fns.items()}
        dropped = warm_up({name: s.take for name, s in samplers.items()},
                          {name: s.calls for name, s in samplers.items()}, rule)
        before, source = read_sm_clock(device)
        sampled = sample_interleaved({name: s.take for name, s in samplers.items()}, rule)
        after, _ = read_sm_clock(device)
    return {name: DeviceTiming(
        method="cuda_graph", median_us=median(x.samples_us), samples_us=x.samples_us, rel_noise=x.rel_noise,
        stop_reason=x.stop_reason, calls_per_sample=samplers[name].calls, sm_clock_mhz_before=before,
        sm_clock_mhz_after=after, sm_clock_source=source, throttled=clock_dropped(before, after),
        notes=list(samplers[name].notes), warmup_samples_us=dropped[name], warmup_ms=rule.warmup_ms)
        for name, x in sampled.items()}


@dataclass(frozen=True)
class Reference:
    """What a candidate's device time is measured beside, in the same sampling rounds (`measure_interleaved`):
    a fixed workload of the same shape, so that the ratio of the two cancels what moves them both (the SM clock
    under a power cap, the memory's state, another machine) and a diff can judge the code, not the GPU's day."""

    what: str
    forward: Callable[[], object]
    step: Optional[Callable[[], object]] = None


def reference_entry(what: str, fwd: DeviceTiming, ref_fwd: DeviceTiming, fwd_bwd: Optional[DeviceTiming] = None,
                    ref_fwd_bwd: Optional[DeviceTiming] = None):
    """The reference's samples (and the median ratio of the candidate's to them) as the report's entry."""
    from adaln_bench.datamodel.schema import DeviceReference

    entry = DeviceReference(what=what, fwd_us=round(ref_fwd.median_us, 3), fwd_samples=_rounded(ref_fwd.samples_us),
                            fwd_ratio=median_ratio(fwd.samples_us, ref_fwd.samples_us))
    if fwd_bwd is not None and ref_fwd_bwd is not None:
        entry.fwd_bwd_us = round(ref_fwd_bwd.median_us, 3)
        entry.fwd_bwd_samples = _rounded(ref_fwd_bwd.samples_us)
        entry.fwd_bwd_ratio = median_ratio(fwd_bwd.samples_us, ref_fwd_bwd.samples_us)
    return entry


def device_time_point(forward: Callable[[], object], step: Optional[Callable[[], object]], device,
                      method: str = "auto", rule: StopRule = StopRule(), reference: Optional[Reference] = None):
    """Forward and (when `step` is given) forward + backward device time of one T, as the report's entry.

    None on a CPU device. The child calls it with the same `forward` and `step` closures it times with
    events (`step` makes fresh leaves each call), after the event timing. With a `reference`, each is sampled
    interleaved with the reference's (graphs only); a candidate or reference that cannot be captured is then
    measured alone, as without one, and `reference_error` says why.
    """
    import torch

    if torch.device(device).type != "cuda":
        return None
    return point_entry(forward, step, reference, method,
                       interleaved=lambda fns: measure_interleaved(fns, device, rule),
                       alone=lambda fn: measure_device_time(fn, device, method, rule),
                       settle=torch.cuda.synchronize)


def point_entry(forward: Callable[[], object], step: Optional[Callable[[], object]], reference: Optional[Reference],
                method: str, interleaved: Callable[[dict], dict[str, DeviceTiming]],
                alone: Callable[[Callable[[], object]], DeviceTiming], settle: Callable[[], object] = lambda: None):
    """device_time_point's choices, with its two ways of measuring passed in (so they are tested on the CPU)."""
    why = None
    if reference is not None and method in ("auto", "cuda_graph"):
        try:
            pair = interleaved({"candidate": forward, "reference": reference.forward})
            fwd, ref_fwd = pair["candidate"], pair["reference"]
            fwd_bwd = ref_fwd_bwd = None
            if step is not None and reference.step is not None:
                pair = interleaved({"candidate": step, "reference": reference.step})
                fwd_bwd, ref_fwd_bwd = pair["candidate"], pair["reference"]
            elif step is not None:
                fwd_bwd = alone(step)
            entry = device_time_entry(fwd, fwd_bwd)
            entry.reference = reference_entry(reference.what, fwd, ref_fwd, fwd_bwd, ref_fwd_bwd)
            return entry
        except Exception as exc:  # noqa: BLE001 - a capture refused: measured alone below, the reason kept
            why = f"{type(exc).__name__}: {exc}".strip()[:300]
            try:  # let the failed capture's work drain first
                settle()
            except Exception:  # noqa: BLE001
                pass
    fwd = alone(forward)
    fwd_bwd = alone(step) if step is not None else None
    entry = device_time_entry(fwd, fwd_bwd)
    entry.reference_error = why
    return entry
