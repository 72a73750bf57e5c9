"""The shape presets and how the command line's sizes resolve to one `Shape` (defined in adaln_bench.shape)."""
from __future__ import annotations

from adaln_bench.errors import UserError
from adaln_bench.shape import Shape

__all__ = ["PRESETS", "Shape", "resolve_shape"]

PRESETS: dict[str, Shape] = {
    # MiniMax-H3: the shape of the reference report, and the default on a GPU.
    "h3": Shape(2688, 5376, 3, "h3"),
    # Flux and Qwen-Image: one modality, D = H = 3072.
    "flux": Shape(3072, 3072, 1, "flux"),
    # A larger CPU smoke shape. Its projection's bf16 GEMMs are slow on a CPU without bf16 instructions (an
    # AVX2 core: ~50 ns per output element): the full probes of that one operator take about 3.5 min of a core.
    "small": Shape(128, 32, 3, "small"),
    # The CPU default and the tests' shape: the probes' structure, every count of them, at the smallest
    # sensible cost (every operator in about a minute on two cores).
    "tiny": Shape(32, 8, 3, "tiny"),
}

CPU_DEFAULT = "tiny"


def resolve_shape(preset: str | None, dim: int | None, hidden: int | None, modalities: int | None,
                  on_gpu: bool) -> Shape:
    """A preset, overridden field by field by explicit sizes; h3 on a GPU and tiny on the CPU by default."""
    name = preset or ("h3" if on_gpu else CPU_DEFAULT)
    if name not in PRESETS:
        raise UserError(f"unknown preset {name!r}; choose one of {', '.join(PRESETS)}")
    base = PRESETS[name]
    overridden = any(v is not None for v in (dim, hidden, modalities))
    shape = Shape(
        dim if dim is not None else base.dim,
        hidden if hidden is not None else base.hidden,
        modalities if modalities is not None else base.modalities,
        None if overridden else base.preset,
    )
    for field_name, value in (("--dim", shape.dim), ("--hidden", shape.hidden), ("--modalities", shape.modalities)):
        if value < 1:
            raise UserError(f"{field_name} must be a positive integer, got {value}")
    if shape.out_features * shape.dim > 2**34:
        raise UserError(f"{shape.describe()}: W would hold more than 2^34 elements")
    return shape
