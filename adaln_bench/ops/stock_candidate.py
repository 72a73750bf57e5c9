"""The stock path as a candidate, `diffusers`: the real diffusers code where it imports, its op-for-op replay
otherwise, and the report's `source` says which (docs/spec.md#8-candidates)."""
from __future__ import annotations

import importlib
from typing import Callable, Optional

from adaln_bench.ops.candidates import BuildContext, Candidate, Implementation, register

# (the diffusers object, ctx) -> forward over the operator's inputs
MakeForward = Callable[[object, BuildContext], Callable]


def load(module: str, name: str) -> tuple[Optional[object], Optional[str]]:
    """The diffusers object, or the reason it cannot be had."""
    try:
        return getattr(importlib.import_module(module), name), None
    except Exception as exc:  # an optional dependency: any failure to import means "use the replay"
        return None, f"{type(exc).__name__}: {exc}"


def register_stock(op: str, module: str, name: str, make_forward: MakeForward,
                   make_replay: Callable[[BuildContext], Callable], what: str, suffix_mode: bool = False) -> Candidate:
    """`what`: the operation in words, e.g. "TimestepEmbedding, FP32 F.linear"; `make_replay(ctx)`: the
    op-for-op replay used without diffusers."""

    def build(ctx: BuildContext) -> Implementation:
        obj, reason = load(module, name)
        mode = f" [{ctx.mode}]" if suffix_mode else ""
        if obj is not None:
            return Implementation(source=f"diffusers {what}{mode}", has_backward=True,
                                  forward=make_forward(obj, ctx), details={"path": f"{module}.{name}"})
        return Implementation(source=f"replay of diffusers {what} (diffusers unavailable){mode}", has_backward=True,
                              forward=make_replay(ctx),
                              details={"path": "replay", "diffusers_unavailable": reason or ""})

    return register(Candidate(name="diffusers", description=f"diffusers {name} (op-for-op replay without it)",
                              default_modes=None, availability=lambda: None, build=build, op=op,
                              suffix_mode=suffix_mode, preload=(module,)))


def register_replay(op: str, replay: Callable, what: str) -> Candidate:
    """An operator diffusers has no function or module for (the model's blocks write it inline): the stock
    candidate is the op-for-op replay of what the block does."""

    def build(ctx: BuildContext) -> Implementation:
        return Implementation(source=f"diffusers {what} (op-for-op replay of the model's block)", has_backward=True,
                              forward=replay, details={"path": "replay"})

    return register(Candidate(name="diffusers", description=f"the stock path: {what}", default_modes=None,
                              availability=lambda: None, build=build, op=op))
