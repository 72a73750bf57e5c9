"""Shape expressions: how an operator declares its tensors' shapes in the model's sizes.

A dimension is an int, a size symbol ("D", "H", "M", "F", "N" = 6·M·H), "n" (the batch's rows), or a
product of those ("6*H", "M*M"). `Shape` (adaln_bench/shape.py) holds the sizes.
"""
from __future__ import annotations

from typing import Union

from adaln_bench.shape import Shape

Dim = Union[int, str]
Dims = tuple[Dim, ...]


def eval_dim(dim: Dim, sizes: Shape, n: int) -> int:
    if isinstance(dim, int):
        return dim
    value = 1
    for factor in dim.split("*"):
        factor = factor.strip()
        if factor.isdigit():
            value *= int(factor)
        elif factor == "n":
            value *= n
        else:
            value *= sizes.symbol(factor)
    return value


def eval_dims(dims: Dims, sizes: Shape, n: int) -> tuple[int, ...]:
    return tuple(eval_dim(d, sizes, n) for d in dims)


def dims_text(dims: Dims) -> str:
    return "(" + ", ".join(str(d).replace("*", "·") for d in dims) + ("," if len(dims) == 1 else "") + ")"
