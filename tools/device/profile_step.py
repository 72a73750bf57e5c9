"""Timeline of one forward + backward step as kernel-bench times it (its graph of steps back to back, replayed):
each kernel's duration and the idle gap before it, median over the steps, from the profiler's CUDA activity
records. Says where a step's time goes beyond the C entry points alone (kernel-bench's second table): the
boundaries between kernels, which no single entry point shows. A negative gap is an overlap: with programmatic
dependent launch (the sm90 path since v13) a kernel's first block may start, and wait, before the kernel before
it ends.

Usage (GPU): python3 tools/device/profile_step.py -l sm90 [-l NAME=FILE.so ...] [--cublas] --sizes 64 [--replays 20]
"""
from __future__ import annotations

import argparse
import statistics
import sys

import torch

from adaln_bench.harness.measurement.device_time import GraphSampler
from adaln_bench.harness.assembly.shapes import PRESETS
from adaln_bench.kernel_bench.child import closures, input_sets, stock_subject
from adaln_bench.kernel_bench.subjects import library_subject, parse_library
from adaln_bench.ops.draws import draw_params
from adaln_bench.ops.registry import get_operator


def per_kernel(spans: list[tuple[str, float, float]], replays: int) -> list[tuple[str, float, float]]:
    """(name, start µs, end µs) of every kernel of `replays` identical replays -> (name, median duration, median
    idle gap before it) for each kernel of one replay, in launch order. The first replay is left out (its first
    gap is the profiler's start). A count that does not split evenly into replays is an error, not a guess."""
    spans = sorted(spans, key=lambda s: s[1])
    if replays < 2 or not spans or len(spans) % replays:
        raise ValueError(f"{len(spans)} kernels do not split into {replays} replays")
    per = len(spans) // replays
    rows = []
    for k in range(per):
        durs, gaps = [], []
        for r in range(1, replays):
            i = r * per + k
            durs.append(spans[i][2] - spans[i][1])
            gaps.append(spans[i][1] - spans[i - 1][2])
        rows.append((spans[k][0], statistics.median(durs), statistics.median(gaps)))
    return rows


def timeline(fn, replays: int) -> list[tuple[str, float, float]]:
    """per_kernel() of `fn` captured as kernel-bench's device time captures it (the harness's graph sampler:
    warm-up on a side stream, then as many calls back to back in one graph as make a measurable span), from the
    profiler's CUDA activity records over `replays` replays."""
    from torch.profiler import ProfilerActivity, profile

    sampler = GraphSampler(fn)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(replays):
            sampler.graph.replay()
        torch.cuda.synchronize()
    spans = [(e.name, e.time_range.start, e.time_range.end) for e in prof.events()
             if e.device_type == torch.autograd.DeviceType.CUDA
             and "memcpy" not in e.name.lower() and "memset" not in e.name.lower()]
    return per_kernel(spans, replays * sampler.calls)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--library", "-l", action="append", default=[])
    ap.add_argument("--cublas", action="store_true")
    ap.add_argument("--sizes", default="64")
    ap.add_argument("--replays", type=int, default=20)
    args = ap.parse_args(argv)
    device = torch.device("cuda", 0)
    shape = PRESETS["h3"]
    op = get_operator("adaln_projection")
    params = draw_params(op, shape, device)
    subjects = {}
    for text in args.library:
        spec = parse_library(text)
        subjects[spec.name] = library_subject(op, spec, shape, device)[0]
    if args.cublas:
        subjects["cublas"] = stock_subject(op, shape)
    for tokens in (int(t) for t in args.sizes.split(",")):
        for name, subject in subjects.items():
            # as kernel-bench replays them: the seeded rows, rotated past L2 where they are small
            forward, step = closures(subject, input_sets(op, shape, tokens, params, device))
            for what, fn in (("fwd", forward), ("fwd+bwd", step)):
                rows = timeline(fn, args.replays)
                total = sum(d + g for _, d, g in rows)
                print(f"\n{name} T={tokens} {what}: {len(rows)} kernels, {total:.1f} µs "
                      f"(kernels {sum(d for _, d, _ in rows):.1f}, gaps {sum(g for _, _, g in rows):.1f})")
                for name, d, g in rows:
                    print(f"  {d:8.1f} µs  gap {g:6.1f}  {name[:110]}")
            del forward, step
            torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
