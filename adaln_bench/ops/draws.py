"""The seeded inputs of an operator, drawn from its declarations (docs/spec.md#3-inputs, #32-the-packed-layout).

Deterministic, so that every run, every mode and RL-Kernel's reports compare number for number: a normal or
uniform tensor from a fresh generator seeded `seed * 1000 + salt` on the run device, the packed layout's
indices from a CPU Mersenne-Twister generator seeded `seed`, and the upstream gradients from one generator
seeded `seed`, one draw per output in order.
"""
from __future__ import annotations

from typing import Optional, Sequence

import torch

from adaln_bench.draws import DrawGeometry
from adaln_bench.ops.spec import Normal, Operator, Packed, TensorSpec, Uniform, scale_value
from adaln_bench.shape import Shape

PARAM_SEED = 1
# Salts are below this, so that seed * SALT_LIMIT + salt never reaches another seed's draws.
SALT_LIMIT = 1000

# The launch geometry every seeded CUDA draw of this process follows (`run --draw-geometry`): None draws with
# torch's own generator, as on the running GPU; a DrawGeometry draws as torch does on a GPU with that many SMs
# (adaln_bench/draws). Set once, by the mode's child, before anything is drawn. CPU draws never depend on it.
_GEOMETRY: Optional[DrawGeometry] = None


def use_geometry(geometry: Optional[DrawGeometry]) -> None:
    global _GEOMETRY
    _GEOMETRY = None if geometry is None or geometry.is_native else geometry


def current_geometry() -> Optional[DrawGeometry]:
    return _GEOMETRY


def seeded(device: torch.device, seed: int):
    """A fresh generator seeded `seed` on `device`, in this process's draw geometry."""
    if _GEOMETRY is not None and torch.device(device).type == "cuda":
        from adaln_bench import draws

        return draws.generator(_GEOMETRY, seed, device)
    return torch.Generator(device=device).manual_seed(seed)


def generator(device: torch.device, seed: int, salt: int):
    return seeded(device, seed * SALT_LIMIT + salt)


def randn(shape, gen, device: torch.device) -> torch.Tensor:
    """`torch.randn(shape, generator=gen)` in float32, whichever kind of generator `seeded` gave."""
    if isinstance(gen, torch.Generator):
        return torch.randn(shape, generator=gen, device=device)
    from adaln_bench import draws

    return draws.randn(shape, gen)


def rand(shape, gen, device: torch.device) -> torch.Tensor:
    if isinstance(gen, torch.Generator):
        return torch.rand(shape, generator=gen, device=device)
    from adaln_bench import draws

    return draws.rand(shape, gen)


def draw_tensor(spec: TensorSpec, sizes: Shape, seed: int, n: int, device: torch.device,
                layout: dict[str, torch.Tensor] | None = None) -> torch.Tensor:
    """One input for probe seed `seed` and `n` rows (parameters: always PARAM_SEED)."""
    shape = spec.shape(sizes, n)
    draw = spec.draw
    if isinstance(draw, Packed):
        layout = layout if layout is not None else packed_layout(seed, n, sizes.modalities, device)
        return layout[draw.field]
    s = PARAM_SEED if spec.role == "param" else seed
    if isinstance(draw, Normal):
        x = randn(shape, generator(device, s, draw.salt), device)
        if draw.scale is not None:
            x = x * scale_value(draw.scale, sizes)
    elif isinstance(draw, Uniform):
        x = rand(shape, generator(device, s, draw.salt), device)
        if draw.offset is not None:
            x = draw.offset + x
    else:  # pragma: no cover - the spec's union is closed
        raise TypeError(f"unknown draw {draw!r}")
    return x if x.dtype == spec.dtype else x.to(spec.dtype)


def packed_layout(seed: int, n: int, modalities: int, device: torch.device) -> dict[str, torch.Tensor]:
    """token_tags then timestep_indices, n values each of randint(0, M) from one CPU generator seeded `seed`;
    the first min(M, n) tags overwritten with 0, 1, …; and the table row timestep_indices·M + token_tags."""
    g = torch.Generator().manual_seed(seed)
    tags = torch.randint(0, modalities, (n,), generator=g)
    steps = torch.randint(0, modalities, (n,), generator=g)
    first = min(modalities, n)
    tags[:first] = torch.arange(first)
    return {"token_tags": tags.to(device), "timestep_indices": steps.to(device),
            "packed_index": (steps * modalities + tags).to(device)}


def draw_rows(op: Operator, sizes: Shape, seed: int, n: int, device: torch.device) -> dict[str, torch.Tensor]:
    """The row and index inputs of the seeded batch (seed, n)."""
    needs_layout = any(isinstance(t.draw, Packed) for t in op.tensors if t.role != "param")
    layout = packed_layout(seed, n, sizes.modalities, device) if needs_layout else None
    return {t.name: draw_tensor(t, sizes, seed, n, device, layout) for t in op.tensors if t.role != "param"}


def draw_params(op: Operator, sizes: Shape, device: torch.device) -> dict[str, torch.Tensor]:
    """The parameters: the same for every probe seed."""
    return {t.name: draw_tensor(t, sizes, PARAM_SEED, 0, device) for t in op.tensors if t.role == "param"}


def draw_upstream(shapes: Sequence[tuple[int, ...]], dtypes: Sequence[torch.dtype], seed: int,
                  device: torch.device) -> tuple[torch.Tensor, ...]:
    """The upstream gradients, drawn once for the full batch: one generator seeded `seed`, `randn` per output
    in order, each cast to its output's dtype. Sub-batches take their matching rows."""
    g = seeded(device, seed)
    return tuple(randn(shape, g, device).to(dtype) for shape, dtype in zip(shapes, dtypes))
