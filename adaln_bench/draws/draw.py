"""Seeded float32 draws on a chosen GPU geometry: GeometryGenerator and randn/rand, drop-ins for a CUDA
torch.Generator with torch.randn/torch.rand."""
from __future__ import annotations

import math
from typing import Optional, Sequence, Union

import torch

from adaln_bench.draws import build, reference
from adaln_bench.draws.geometry import DrawGeometry, geometry as parse_geometry
from adaln_bench.draws.plan import plan_draw

Shape = Union[int, Sequence[int], torch.Size]
NORMAL, UNIFORM = 0, 1


class GeometryGenerator:
    """Draws as a CUDA torch.Generator seeded `seed` draws on a GPU with `sms` multiprocessors.

    Tracks the Philox offset as torch.Generator does: a fresh generator starts at 0 and each draw advances it
    (plan.py), so successive draws from one GeometryGenerator match successive draws from one torch.Generator
    on that GPU. The output lives on `device`: any CUDA device (the geometry is the one named, not this one's),
    or the CPU, where the numpy model of reference.py fills it (rand bit for bit, randn within ~1e-6 of the
    GPU's values: for tests and for looking at a draw without a GPU; slow past a few million elements)."""

    def __init__(self, seed: int, sms: int, device: Union[str, torch.device, int, None] = None,
                 threads_per_sm: int = 2048):
        if not isinstance(sms, int) or sms < 1:
            raise ValueError(f"sms must be a positive int, got {sms!r}")
        self.sms = sms
        self.threads_per_sm = threads_per_sm
        dev = torch.device("cuda") if device is None else torch.device(device)
        if dev.type not in ("cuda", "cpu"):
            raise ValueError(f"a GeometryGenerator draws on a CUDA device (or the CPU's model), got {dev}")
        if dev.type == "cuda" and dev.index is None:
            dev = torch.device("cuda", torch.cuda.current_device())
        self.device = dev
        self.manual_seed(seed)

    def manual_seed(self, seed: int) -> "GeometryGenerator":
        seed = int(seed)
        if not 0 <= seed < 2**64:
            raise ValueError(f"seed must be in [0, 2^64), got {seed}")
        self._seed = seed
        self._offset = 0
        return self

    def initial_seed(self) -> int:
        return self._seed

    def get_offset(self) -> int:
        """The Philox offset the next draw starts from (torch.Generator.get_offset on a CUDA generator)."""
        return self._offset

    def set_offset(self, offset: int) -> None:
        if offset < 0 or offset % 4:
            raise ValueError(f"a Philox offset is a non-negative multiple of 4, got {offset}")
        self._offset = int(offset)

    def __repr__(self) -> str:
        return (f"GeometryGenerator(seed={self._seed}, sms={self.sms}, threads_per_sm={self.threads_per_sm}, "
                f"device={self.device}, offset={self._offset})")

    def randn(self, shape: Shape, out: Optional[torch.Tensor] = None) -> torch.Tensor:
        return self._draw(NORMAL, shape, out, 0.0, 1.0)

    def rand(self, shape: Shape, out: Optional[torch.Tensor] = None) -> torch.Tensor:
        return self._draw(UNIFORM, shape, out, 0.0, 1.0)

    def _draw(self, kind: int, shape: Shape, out: Optional[torch.Tensor], a: float, b: float) -> torch.Tensor:
        size = _size(shape)
        if out is None:
            out = torch.empty(size, dtype=torch.float32, device=self.device)
        elif out.dtype != torch.float32 or not out.is_contiguous() or out.device != self.device \
                or tuple(out.shape) != tuple(size):
            raise ValueError(f"out must be a contiguous float32 tensor of shape {tuple(size)} on {self.device}, "
                             f"got {out.dtype} {tuple(out.shape)} on {out.device}")
        launches, after = plan_draw(out.numel(), self._offset, self.sms, self.threads_per_sm)
        lib = _library(self.device) if launches and self.device.type == "cuda" else None  # may build: first
        self._offset = after  # as torch: the offset is taken when the draw is enqueued
        if not launches:
            return out
        if lib is None:  # the CPU: the numpy model
            flat = out.view(-1).numpy()
            for la in launches:
                flat[la.start: la.start + la.numel] = reference.launch_values(
                    "randn" if kind == NORMAL else "rand", la, self._seed)
            return out
        stream = torch.cuda.current_stream(self.device).cuda_stream
        base = out.data_ptr()
        for la in launches:
            lib.fill(kind, base + 4 * la.start, la.numel, self._seed, la.offset, la.blocks, a, b,
                     self.device.index, stream)
        return out


AnyGenerator = Union[torch.Generator, GeometryGenerator]


def randn(shape: Shape, gen: AnyGenerator, out: Optional[torch.Tensor] = None) -> torch.Tensor:
    """torch.randn(shape, generator=gen) in float32 on gen's device, for either kind of generator."""
    return _draw("randn", "normal_", shape, gen, out)


def rand(shape: Shape, gen: AnyGenerator, out: Optional[torch.Tensor] = None) -> torch.Tensor:
    """torch.rand(shape, generator=gen) in float32 on gen's device, for either kind of generator."""
    return _draw("rand", "uniform_", shape, gen, out)


def _draw(draw: str, fill: str, shape: Shape, gen: AnyGenerator, out: Optional[torch.Tensor]) -> torch.Tensor:
    """`torch.<draw>` (or the geometry generator's), into `out` with the tensor method `fill` over [0, 1)."""
    if isinstance(gen, GeometryGenerator):
        return getattr(gen, draw)(shape, out)
    if out is not None:
        return getattr(out, fill)(0.0, 1.0, generator=gen)
    return getattr(torch, draw)(_size(shape), generator=gen, device=gen.device, dtype=torch.float32)


def generator(geom: Union[DrawGeometry, str], seed: int,
              device: Union[str, torch.device, int, None] = None) -> AnyGenerator:
    """A generator seeded `seed` on `device`: torch's own for a native geometry, else a GeometryGenerator."""
    g = parse_geometry(geom) if isinstance(geom, str) else geom
    dev = torch.device("cuda") if device is None else torch.device(device)
    if g.is_native:
        return torch.Generator(device=dev).manual_seed(seed)
    return GeometryGenerator(seed, g.sms, dev, g.threads_per_sm)


def device_geometry(device: Union[str, torch.device, int, None] = None) -> DrawGeometry:
    """The geometry of a CUDA device itself (its SM count and threads per SM): what torch's generator uses there."""
    props = torch.cuda.get_device_properties(torch.device("cuda") if device is None else device)
    return DrawGeometry(str(props.multi_processor_count), props.multi_processor_count,
                        props.max_threads_per_multi_processor)


def _size(shape: Shape) -> tuple[int, ...]:
    size = (shape,) if isinstance(shape, int) else tuple(int(s) for s in shape)
    if any(s < 0 for s in size):
        raise ValueError(f"negative size in {size}")
    if math.prod(size) >= 2**63:
        raise ValueError(f"{size} has too many elements")
    return size


def _library(device: torch.device) -> build.Library:
    major, minor = torch.cuda.get_device_capability(device)
    return build.load(build.arch_for_capability(major, minor))
