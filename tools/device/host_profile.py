"""Where an eager training step's host time goes: for each operator and subject (its stock path and candidates),
the step kernel-bench and the harness time (fresh leaves, forward, backward with ones) run eagerly, with the
host-inclusive time (events around each call, the host in the loop), the host's own time per step (the wall clock
over a burst, synchronized once at the end), the device time of the same step replayed in a CUDA graph, and
torch.profiler's top CPU ops of a few steps.

Why: final_adaln_out's bundled step took 1.37-1.41 ms host-inclusive at S = 4097 and 32768 against 200 / 654 us of
device time (its 7a100a7 report, kept in results/h200/history/final_adaln_out/), while norm_modulate's was device-bound at 32768.
Usage (on the GPU machine): python3 tools/device/host_profile.py [--op final_adaln_out] [--sizes 4097,32768]
  [--json PATH] [--top 25]
"""
from __future__ import annotations

import argparse
import json
import sys
import time

import torch

from adaln_bench.harness.measurement.device_time import StopRule, measure_interleaved
from adaln_bench.harness.assembly.shapes import PRESETS
from adaln_bench.harness.measurement.timing import time_call
from adaln_bench.kernel_bench.child import candidate_subject, closures, input_sets, stock_subject
from adaln_bench.ops.draws import draw_params
from adaln_bench.ops.registry import get_operator

RULE = StopRule(target=0.01, min_samples=10, max_samples=60, max_seconds=0.8, batch=5, warmup_ms=50.0)


def host_us(fn, device, steps: int = 30) -> float:
    """The host's own time per step: a burst of steps on the wall clock, one sync at the end (the GPU runs behind)."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize(device)
    t0 = time.perf_counter()
    for _ in range(steps):
        fn()
    launched = time.perf_counter() - t0
    torch.cuda.synchronize(device)
    return launched / steps * 1e6


def profile_table(fn, top: int) -> str:
    from torch.profiler import ProfilerActivity, profile

    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(3):
            fn()
        torch.cuda.synchronize()
    return prof.key_averages().table(sort_by="cpu_time_total", row_limit=top)


def per_call_us(fn, n: int = 2000) -> float:
    for _ in range(100):
        fn()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t0) / n * 1e6


def glue_us(device) -> dict:
    """The gathered ops' per-call host steps, each the way it is done now and the way it was (f6229f3)."""
    import ctypes

    from adaln_bench.kernels.gathered import build as B
    from adaln_bench.kernels.gathered import ops
    from adaln_bench.kernels.toolchain.c_calls import error_buffer

    ops.library(device)
    return {"stream, raw handle": per_call_us(lambda: ops._stream(device)),
            "stream, torch.cuda.current_stream": per_call_us(lambda: torch.cuda.current_stream(device).cuda_stream),
            "library, cached by index": per_call_us(lambda: ops.library(device)),
            "library, load(target_for_device)": per_call_us(lambda: B.load(ops.target_for_device(device))),
            "error buffer, per thread": per_call_us(error_buffer),
            "error buffer, new": per_call_us(lambda: ctypes.create_string_buffer(1024))}


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--op", action="append")
    ap.add_argument("--candidate", action="append")
    ap.add_argument("--sizes", default="4097,32768")
    ap.add_argument("--json")
    ap.add_argument("--top", type=int, default=25)
    args = ap.parse_args(argv)
    device = torch.device("cuda", 0)
    shape = PRESETS["h3"]
    rows, tables = [], []
    for name in args.op or ["final_adaln_out", "norm_modulate"]:
        op = get_operator(name)
        params = draw_params(op, shape, device)
        subjects = {"stock": stock_subject(op, shape)}
        for c in args.candidate or ["bundled"]:
            subjects[c] = candidate_subject(op, c, shape, device)
        for tokens in (int(s) for s in args.sizes.split(",")):
            sets = input_sets(op, shape, tokens, params, device)[:1]
            steps = {n: closures(s, sets)[1] for n, s in subjects.items()}
            graph = measure_interleaved(steps, device, RULE)
            for n, step in steps.items():
                incl, _ = time_call(step, device, 3, 20)
                row = {"op": name, "S": tokens, "subject": n, "host_inclusive_us": incl.median,
                       "host_us": host_us(step, device), "device_us": graph[n].median_us}
                rows.append(row)
                print(json.dumps(row), flush=True)
                tables.append(f"## {name} {n} S={tokens}\n{profile_table(step, args.top)}")
            del steps, sets
            torch.cuda.empty_cache()
    glue = glue_us(device)
    for t in tables:
        print(t)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rows": rows, "glue_us": glue, "profiles": tables}, f, indent=1)
    print("glue step | us a call")
    for k, v in glue.items():
        print(f"{k} | {v:.2f}")
    print("op | S | subject | host-inclusive us | host us (burst) | device us (graph)")
    for r in rows:
        print(f"{r['op']} | {r['S']} | {r['subject']} | {r['host_inclusive_us']:.1f} | {r['host_us']:.1f} | "
              f"{r['device_us']:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
