"""Latency: median of 100 samples after 20 warm-up calls, with the distribution kept beside it.

The contract: docs/spec.md#6-latency.
"""
from __future__ import annotations

import time
from typing import Callable

import torch

from adaln_bench.datamodel.schema import Distribution

WARMUP, SAMPLES = 20, 100


def distribution(samples_us: list[float]) -> Distribution:
    t = torch.tensor(samples_us, dtype=torch.float64)
    q = torch.quantile(t, torch.tensor([0.0, 0.25, 0.5, 0.75, 1.0], dtype=torch.float64))
    return Distribution(min=q[0].item(), q1=q[1].item(), median=q[2].item(), q3=q[3].item(),
                        max=q[4].item(), count=len(samples_us))


def time_call(fn: Callable[[], object], device: torch.device,
              warmup: int = WARMUP, samples: int = SAMPLES) -> tuple[Distribution, str]:
    """Each sample is one call: between two CUDA events on a GPU, on the monotonic clock on a CPU."""
    for _ in range(warmup):
        fn()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(samples)]
        for start, end in events:
            start.record()
            fn()
            end.record()
        torch.cuda.synchronize(device)
        return distribution([s.elapsed_time(e) * 1e3 for s, e in events]), "cuda_event"
    times = []
    for _ in range(samples):
        t0 = time.perf_counter_ns()
        fn()
        times.append((time.perf_counter_ns() - t0) / 1e3)
    return distribution(times), "monotonic"
