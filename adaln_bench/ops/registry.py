"""The operator registry: every operator of the model the harness measures, one folder each under ops/.

An operator's folder declares it (`register(Operator(...))` in its __init__) and registers its candidates
(its `candidates` module). Listing the operators imports their folders, which import no optional library.
"""
from __future__ import annotations

import importlib

from adaln_bench.errors import UserError
from adaln_bench.ops.spec import Operator

# In the model's order, from the timestep embedding to the final norm.
BUILTIN = ("timestep_sinusoid", "timestep_mlp", "adaln_projection", "adaln_row_gather", "norm_modulate",
           "gate_residual", "final_adaln_out")

_OPERATORS: dict[str, Operator] = {}
_loaded = False


def register(op: Operator) -> Operator:
    if op.name in _OPERATORS:
        raise ValueError(f"operator {op.name!r} is registered twice")
    _OPERATORS[op.name] = op
    return op


def load_builtin_operators() -> None:
    global _loaded
    if _loaded:
        return
    _loaded = True
    for name in BUILTIN:
        try:
            importlib.import_module(f"adaln_bench.ops.{name}")
            importlib.import_module(f"adaln_bench.ops.{name}.candidates")
        except ModuleNotFoundError as exc:  # an operator not written yet is skipped; a broken one raises
            if exc.name not in (f"adaln_bench.ops.{name}", f"adaln_bench.ops.{name}.candidates"):
                raise


def all_operators() -> dict[str, Operator]:
    load_builtin_operators()
    return {name: _OPERATORS[name] for name in BUILTIN if name in _OPERATORS} | {
        k: v for k, v in _OPERATORS.items() if k not in BUILTIN}


def get_operator(name: str) -> Operator:
    ops = all_operators()
    if name not in ops:
        raise UserError(f"unknown operator {name!r}; known operators: {', '.join(ops)}")
    return ops[name]
