"""Run the bundled kernel's C entry points (and cuBLAS's matching GEMMs) once each inside a profiler range, for
Nsight Compute: where a kernel's time goes (DRAM and L2 traffic, throughput against peak), which kernel-bench's
device times cannot say. Run under ncu with --profile-from-start off (tools/device/profile.sh does).

Usage: python3 tools/device/profile_entries.py --library sm90 [--library NAME=FILE.so ...] --sizes 4,64 [--cublas]
"""
from __future__ import annotations

import argparse
import sys

import torch

from adaln_bench.harness.measurement import plan as P
from adaln_bench.ops.draws import draw_params, draw_upstream
from adaln_bench.ops.registry import get_operator
from adaln_bench.harness.assembly.shapes import PRESETS
from adaln_bench.kernel_bench.entry_points import entry_points
from adaln_bench.kernel_bench.subjects import library_subject, parse_library


def profiled(label: str, fn) -> None:
    """Warm up (first-call setup stays outside the range), then one call inside it, under an NVTX name."""
    fn()
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStart()
    with torch.cuda.nvtx.range(label):
        fn()
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStop()
    print(f"profiled {label}", flush=True)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--library", "-l", action="append", default=[])
    ap.add_argument("--sizes", default="64")
    ap.add_argument("--parts", default="fwd,d_temb,dW")
    ap.add_argument("--cublas", action="store_true", help="also cuBLAS's forward, d_act and dW GEMMs")
    args = ap.parse_args(argv)
    device = torch.device("cuda", 0)
    shape = PRESETS["h3"]
    op = get_operator("adaln_projection")
    params = draw_params(op, shape, device)
    parts = args.parts.split(",")
    for tokens in (int(t) for t in args.sizes.split(",")):
        for spec in args.library:
            lib_spec = parse_library(spec)
            _, lib, _ = library_subject(op, lib_spec, shape, device)
            calls = entry_points(lib, shape, params, tokens, device)
            for part in parts:
                profiled(f"{lib_spec.name}/{part}/T={tokens}", calls[part])
        if args.cublas:
            act = torch.randn(tokens, shape.dim, device=device).to(torch.bfloat16)
            dy = draw_upstream([(tokens, shape.out_features)], [torch.bfloat16], P.ACCURACY_UPSTREAM_SEED, device)[0]
            w = params["w"]
            profiled(f"cublas/fwd/T={tokens}", lambda: torch.nn.functional.linear(act, w))
            profiled(f"cublas/d_act/T={tokens}", lambda: dy @ w)
            profiled(f"cublas/dW/T={tokens}", lambda: dy.t() @ act)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
