"""Seeded draws as PyTorch's CUDA generator makes them on a GPU of a given SM count (issue 34).

torch.randn/torch.rand with a seeded CUDA torch.Generator lay elements over Philox subsequences with a stride
equal to the threads launched, at most SMs x 2048, so the same seed gives different tensors on an H200 (132 SMs)
and a B200 (148 SMs) past the first 270,336 elements. This package draws with any chosen geometry, bit for bit
as torch does on such a GPU, on whatever GPU it runs:

    from adaln_bench import draws
    geom = draws.geometry("b200")              # "native" | "h200" | "b200" | "<SM count>"
    g = draws.generator(geom, seed, device)     # torch.Generator for native, else a GeometryGenerator
    x = draws.randn((n, 5376), g)               # float32 on device, as torch.randn(..., generator=g)
    u = draws.rand((n, 3), g)

draw.py holds the generator and the draws (torch), plan.py the layout arithmetic, reference.py a CPU model
(numpy), build.py the nvcc build of philox_draw.cu; geometry, plan, reference and build import without torch.
Imports nothing else of adaln_bench but adaln_bench.errors.
"""
from __future__ import annotations

from adaln_bench.draws.geometry import KNOWN_SMS, NATIVE, DrawGeometry, geometry
from adaln_bench.draws.plan import Launch, plan_draw

__all__ = ["KNOWN_SMS", "NATIVE", "DrawGeometry", "geometry", "Launch", "plan_draw", "GeometryGenerator",
           "generator", "randn", "rand", "device_geometry"]

_LAZY = {"GeometryGenerator", "generator", "randn", "rand", "device_geometry"}


def __getattr__(name: str):  # the torch-using half loads on first use
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module("adaln_bench.draws.draw"), name)
    raise AttributeError(f"module 'adaln_bench.draws' has no attribute {name!r}")
