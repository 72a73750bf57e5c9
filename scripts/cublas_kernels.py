"""Which GPU kernels the plain cuBLAS path runs at each T, forward and backward, and their device time.

cuBLAS's kernel names carry its tile, stage and cluster choice (e.g. nvjet_..._256x128_64x4_2x1_...), the
configuration the bundled kernel is measured against. Usage on a GPU machine:

    python3 scripts/cublas_kernels.py [T ...]        (default: 1 4 64 256 2048)
"""
from __future__ import annotations

import sys
from collections import defaultdict
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout, not an installed copy
from adaln_bench.ops.adaln_projection.inputs import make_params, make_temb  # noqa: E402
from adaln_bench.harness.shapes import PRESETS  # noqa: E402
from adaln_bench.ops.adaln_projection import replay  # noqa: E402


def kernels_of(step, reps: int = 3) -> list[tuple[str, float]]:
    for _ in range(2):
        step()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(reps):
            step()
        torch.cuda.synchronize()
    total: dict[str, float] = defaultdict(float)
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            total[e.name] += e.device_time_total / reps
    return sorted(total.items(), key=lambda kv: -kv[1])


def main(sizes: list[int]) -> None:
    device = torch.device("cuda", 0)
    shape = PRESETS["h3"]
    params = make_params(shape, device)
    for t in sizes:
        temb = make_temb(t, shape, 11, device)
        ones = torch.ones(t, shape.out_features, dtype=torch.bfloat16, device=device)

        def step() -> None:
            leaf = temb.detach().requires_grad_()
            w = params.weight.detach().requires_grad_()
            b = params.bias.detach().requires_grad_()
            replay(leaf, w, b).backward(ones)

        print(f"T={t}")
        for name, us in kernels_of(step):
            print(f"  {us:9.1f} µs  {name[:150]}")


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [1, 4, 64, 256, 2048])
