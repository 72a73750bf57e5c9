"""What an operator is, as data: its tensors, outputs, gradients, sizes, FP64 formula, stock path and cost.

The harness (probes, accuracy, latency, device time, cold start, fingerprints, the CPU estimate) reads these
records and names no operator. The contract: docs/spec.md#2-the-operators.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Literal, Optional, Union

import torch

from adaln_bench.ops.plan import Family
from adaln_bench.ops.sizes import Dims, dims_text, eval_dims
from adaln_bench.shape import Shape

Role = Literal["row", "param", "index"]


Scale = Union[float, str]  # a number, or "SYM^POWER" in the model's sizes, e.g. "D^-0.5"


def scale_value(scale: Scale, sizes: Shape) -> float:
    if isinstance(scale, str):
        symbol, power = scale.split("^")
        return sizes.symbol(symbol.strip()) ** float(power)
    return scale


@dataclass(frozen=True)
class Normal:
    """`torch.randn(shape, generator=g(seed, salt))` in float32, times `scale` (None: no multiply), cast."""

    salt: int
    scale: Optional[Scale] = None


@dataclass(frozen=True)
class Uniform:
    """`offset + torch.rand(shape, generator=g(seed, salt))` in float32 (offset None: no add), cast."""

    salt: int
    offset: Optional[float] = None


PackedField = Literal["token_tags", "timestep_indices", "packed_index"]


@dataclass(frozen=True)
class Packed:
    """An index from the packed layout (docs/spec.md#32-the-packed-layout): the tags, the timestep indices, or
    the table row timestep_indices * M + token_tags."""

    field: PackedField


Draw = Union[Normal, Uniform, Packed]


@dataclass(frozen=True)
class TensorSpec:
    """One input. A row input is sliced with the run's rows (on dim 0); a parameter never; an index is an
    integer row input without a gradient. `report_key` names it in a report's input fingerprint where that
    differs from `name` (the projection's W and b were `weight` and `bias` before operators had names)."""

    name: str
    role: Role
    dims: Dims  # e.g. ("n", "D"); "n" is the batch's rows
    dtype: torch.dtype
    draw: Draw
    report_key: Optional[str] = None

    @property
    def key(self) -> str:
        return self.report_key or self.name

    def shape(self, sizes: Shape, n: int) -> tuple[int, ...]:
        return eval_dims(self.dims, sizes, n)

    def describe(self) -> str:
        dims = dims_text(self.dims)
        draw = self.draw
        if isinstance(draw, Normal):
            how = f"normal, salt {draw.salt}" + (f", scale {draw.scale}" if draw.scale is not None else "")
        elif isinstance(draw, Uniform):
            how = (f"{draw.offset:g} + " if draw.offset is not None else "") + f"uniform, salt {draw.salt}"
        else:
            how = f"packed layout: {draw.field}"
        return f"{self.name}: {self.role} {dims} {str(self.dtype).replace('torch.', '')}, {how}"


@dataclass(frozen=True)
class OutputSpec:
    name: str
    dims: Dims
    dtype: torch.dtype

    def shape(self, sizes: Shape, n: int) -> tuple[int, ...]:
        return eval_dims(self.dims, sizes, n)


@dataclass(frozen=True)
class Cost:
    """Bytes moved through device memory (each input read once, each output written once) and FLOPs."""

    fwd_bytes: float
    step_bytes: float
    fwd_flops: float = 0.0
    step_flops: float = 0.0


@dataclass(frozen=True)
class Modes:
    """Which modes an operator runs under by default, and why: a mode that changes nothing the operator
    dispatches to is recorded as such (`skipped` with its reason), not silently left out."""

    default: Optional[tuple[str, ...]]  # None: every mode
    why: str
    skipped_reason: str = ""


Formula = Callable[..., Union[torch.Tensor, tuple]]


@dataclass(frozen=True)
class Operator:
    name: str
    description: str
    tensors: tuple[TensorSpec, ...]
    outputs: tuple[OutputSpec, ...]
    grads: tuple[str, ...]  # the inputs that get fresh leaves
    family: Family
    # Size names the operator reads (the report's shape records them): dim, hidden, modalities, frequency.
    size_names: tuple[str, ...]
    reference: Formula  # the FP64 formula, inputs in `tensors` order
    stock: Formula  # the stock path (op for op), the device-time reference of every candidate
    stock_what: str
    cost: Callable[[Shape, int], Cost]
    modes: Modes
    # Where the operator runs in the model, from the timestep embedding (low) to the output (high): the order
    # `adaln-bench ops`, the reports and the pins list operators in. The built-ins leave gaps of 10 for new ones.
    pipeline_position: int
    # True when `reference` and `stock` take the sizes first (`f(sizes)` returns the formula): an operator
    # whose formula needs a size its inputs do not show (timestep_sinusoid's width F).
    sized_formulas: bool = False
    # The gradients that are sums over tokens into a small table (or what makes the table): the gathered
    # operators' table gradients, which the stock path adds with atomics (kernel-bench judges their errors).
    table_grads: tuple[str, ...] = ()
    # How reports name the stock path in a few words ("cuBLAS"); None: "the stock path".
    stock_short: Optional[str] = None
    # GPU memory a child holds while it measures the operator, in multiples of its largest step's `step_bytes`;
    # None: the memory ledger's STEP_COPIES. Set where the run index's `peak_memory_by_op` measured more.
    step_copies: Optional[float] = None

    @property
    def reads_out_features(self) -> bool:
        """Whether a tensor's shape uses N = 6·M·H: the operator's sizes are then described with N."""
        dims = [d for t in (*self.tensors, *self.outputs) for d in t.dims if isinstance(d, str)]
        return any("N" in (f.strip() for f in d.split("*")) for d in dims)

    def reference_for(self, sizes: Shape) -> Formula:
        return self.reference(sizes) if self.sized_formulas else self.reference

    def stock_for(self, sizes: Shape) -> Formula:
        return self.stock(sizes) if self.sized_formulas else self.stock

    def tensor(self, name: str) -> TensorSpec:
        for t in self.tensors:
            if t.name == name:
                return t
        raise KeyError(f"{self.name} has no tensor {name!r}")

    def runs_under(self, mode: str) -> bool:
        return self.modes.default is None or mode in self.modes.default
