"""Why kernel-bench's copy ran at 2.7 TB/s on an H200 while gathered_check's reached 4.2-4.3 (issue 32's copy
rate): the same bytes copied several ways, each timed by CUDA-graph replay as kernel-bench times its subjects.

Ways: torch's `copy_` (a cudaMemcpyAsync; a memcpy node in a graph) and an elementwise kernel (`bitwise_not`
over int32 views), each over one buffer pair or rotated over several, each alone and interleaved with the
other, plus the memcpy eager (no graph, events around a burst). Prints a table; `--json PATH` keeps it all.
Usage (on the GPU machine): python3 scripts/copy_probe.py [--json PATH] [--sizes-mb 88,705,2819]
"""
from __future__ import annotations

import argparse
import json
import sys
import time

import torch

from adaln_bench.harness.device_time import StopRule, measure_interleaved
from adaln_bench.kernel_bench.op_child import copies, cycling

RULE = StopRule(target=0.01, min_samples=10, max_samples=100, max_seconds=1.0, batch=5, warmup_ms=50.0)


def buffers(half: int, k: int, device) -> list[tuple[torch.Tensor, torch.Tensor]]:
    return [(torch.empty(half, dtype=torch.uint8, device=device).random_(),
             torch.empty(half, dtype=torch.uint8, device=device)) for _ in range(k)]


def ways(pairs) -> dict:
    words = [(s.view(torch.int32), d.view(torch.int32)) for s, d in pairs]
    return {"memcpy": cycling([lambda s=s, d=d: d.copy_(s) for s, d in pairs]),
            "kernel": cycling([lambda s=s, d=d: torch.bitwise_not(s, out=d) for s, d in words])}


def eager_memcpy_us(pairs, reps: int = 20) -> float:
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for s, d in pairs:
        d.copy_(s)
    torch.cuda.synchronize()
    start.record()
    for i in range(reps):
        s, d = pairs[i % len(pairs)]
        d.copy_(s)
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) * 1e3 / reps


def probe(total_bytes: int, device) -> dict:
    half = -(-total_bytes // 32) * 16
    out: dict = {"bytes": 2 * half}
    for label, k in (("one pair", 1), ("rotated", max(2, copies(half)))):
        pairs = buffers(half, k, device)
        fns = ways(pairs)
        for name, fn in fns.items():
            t = measure_interleaved({name: fn}, device, RULE)[name]
            out[f"{name} alone, {label}"] = t.median_us
        both = measure_interleaved(fns, device, RULE)
        for name, t in both.items():
            out[f"{name} interleaved, {label}"] = t.median_us
        out[f"memcpy eager, {label}"] = eager_memcpy_us(pairs)
        out[f"pairs, {label}"] = k
        del pairs, fns
        torch.cuda.empty_cache()
    return out


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    ap.add_argument("--sizes-mb", default="88,705,2819")
    args = ap.parse_args(argv)
    device = torch.device("cuda", 0)
    t0 = time.time()
    results = {}
    for mb in (int(x) for x in args.sizes_mb.split(",")):
        results[mb] = probe(mb * 1_000_000, device)
        print(f"[{time.time() - t0:6.1f}s] {mb} MB done", flush=True)
    doc = {"device": torch.cuda.get_device_name(device), "torch": torch.__version__, "results": results}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(doc, f, indent=1)
    keys = [k for k in results[next(iter(results))] if not k.startswith(("bytes", "pairs"))]
    print("TB/s (read + write) | " + " | ".join(f"{mb} MB" for mb in results))
    for k in keys:
        print(f"{k} | " + " | ".join(f"{r['bytes'] / r[k] / 1e6:.2f}" for r in results.values()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
