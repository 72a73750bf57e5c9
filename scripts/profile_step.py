"""Timeline of one forward + backward step as kernel-bench times it (a CUDA graph replayed): each kernel's
duration and the idle gap before it, median over replays, from the profiler's CUDA activity records. Says
where a step's time goes beyond the C entry points alone (kernel-bench's second table): the boundaries
between kernels, which no single entry point shows.

Usage (GPU): python3 scripts/profile_step.py -l sm90 [-l NAME=FILE.so ...] [--cublas] --sizes 64 [--replays 20]
"""
from __future__ import annotations

import argparse
import statistics
import sys

import torch
from torch.profiler import ProfilerActivity, profile

from adaln_bench.harness.inputs import make_params
from adaln_bench.harness.shapes import PRESETS
from adaln_bench.kernels.bench.child import forward_and_step
from adaln_bench.kernels.bench.subjects import cublas_subject, library_subject, parse_library


def captured(fn, device: torch.device) -> torch.cuda.CUDAGraph:
    side = torch.cuda.Stream(device)
    side.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(side):
        for _ in range(3):
            fn()
    torch.cuda.current_stream(device).wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    return graph


def timeline(graph: torch.cuda.CUDAGraph, replays: int) -> list[tuple[str, float, float]]:
    """(kernel, median duration µs, median gap before it µs) in launch order, over `replays` replays."""
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(replays):
            graph.replay()
        torch.cuda.synchronize()
    kernels = sorted((e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA
                      and "memcpy" not in e.name.lower() and "memset" not in e.name.lower()),
                     key=lambda e: e.time_range.start)
    per = len(kernels) // replays
    if per == 0:
        return []
    rows = []
    for k in range(per):
        durs, gaps = [], []
        for r in range(1, replays):  # the first replay's gaps include the profiler's start
            i = r * per + k
            e = kernels[i]
            durs.append(e.time_range.end - e.time_range.start)
            gaps.append(e.time_range.start - kernels[i - 1].time_range.end)
        rows.append((kernels[k].name, statistics.median(durs), statistics.median(gaps)))
    return rows


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--library", "-l", action="append", default=[])
    ap.add_argument("--cublas", action="store_true")
    ap.add_argument("--sizes", default="64")
    ap.add_argument("--replays", type=int, default=20)
    args = ap.parse_args(argv)
    device = torch.device("cuda", 0)
    shape = PRESETS["h3"]
    params = make_params(shape, device)
    subjects = [library_subject(parse_library(s), device) for s in args.library]
    if args.cublas:
        subjects.append(cublas_subject())
    for tokens in (int(t) for t in args.sizes.split(",")):
        for subject in subjects:
            forward, step = forward_and_step(subject, params, shape, tokens, device)
            for what, fn in (("fwd", forward), ("fwd+bwd", step)):
                rows = timeline(captured(fn, device), args.replays)
                total = sum(d + g for _, d, g in rows)
                print(f"\n{subject.name} T={tokens} {what}: {len(rows)} kernels, {total:.1f} µs "
                      f"(kernels {sum(d for _, d, _ in rows):.1f}, gaps {sum(g for _, _, g in rows):.1f})")
                for name, d, g in rows:
                    print(f"  {d:8.1f} µs  gap {g:6.1f}  {name[:110]}")
            del forward, step
            torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
