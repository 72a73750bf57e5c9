"""The baseline: diffusers' MiniMax-H3 AdaLN modulation module, or its op-for-op replay without diffusers.

The module returns six (M·T, H) views of one (T, N) table; the harness compares tables, so the
views are joined back into (T, N) (a copy, bit for bit) with autograd flowing through.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from adaln_bench.kernels.registry import BuildContext, Candidate, Implementation, register

MODULE_PATH = "diffusers.models.transformers.transformer_minimax_h3"
CLASS_NAME = "MiniMaxH3AdaLayerNormModulation"


def replay(temb: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """What the module does, op for op: SiLU at temb's precision, one cast to W's dtype, one linear."""
    return F.linear(F.silu(temb).to(w.dtype), w, b)


def _diffusers_module():
    """The diffusers class, or the reason it cannot be had."""
    try:
        import importlib

        module = importlib.import_module(MODULE_PATH)
        return getattr(module, CLASS_NAME), None
    except Exception as exc:  # an optional dependency: any failure to import means "use the replay"
        return None, f"{type(exc).__name__}: {exc}"


def _module_forward(cls, ctx: BuildContext):
    with torch.device("meta"):
        module = cls(ctx.shape.dim, ctx.shape.hidden)
    # The module's linear holds 6 * 3 * H outputs; other modality counts get a linear of their size.
    module.linear = torch.nn.Linear(ctx.shape.dim, ctx.out_features, bias=True, device="meta")
    captured: list[torch.Tensor] = []
    # The (T, N) table is the linear's output; the six pieces the module returns are views of it. Taking the
    # table itself (not a concatenation of the pieces) keeps a copy of the output out of the timings.
    module.linear.register_forward_hook(lambda _mod, _inp, out: captured.append(out))

    def forward(temb: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        captured.clear()
        # Our leaves stand in for the module's parameters, so their gradients land on them as in a real model.
        pieces = torch.func.functional_call(module, {"linear.weight": w, "linear.bias": b}, (temb,))
        table = captured[0]
        if any(p.untyped_storage().data_ptr() != table.untyped_storage().data_ptr() for p in pieces):
            raise RuntimeError(f"{CLASS_NAME} returned tensors that are not views of its linear's output")
        return table.reshape(temb.shape[0], ctx.out_features)

    return forward


def _build(ctx: BuildContext) -> Implementation:
    cls, reason = _diffusers_module()
    if cls is not None:
        return Implementation(
            source=f"diffusers {CLASS_NAME}, BF16 F.linear [{ctx.mode}]",
            has_backward=True,
            forward=_module_forward(cls, ctx),
            details={"path": f"{MODULE_PATH}.{CLASS_NAME}"},
        )
    return Implementation(
        source=f"replay of diffusers AdaLN projection (diffusers unavailable), BF16 F.linear [{ctx.mode}]",
        has_backward=True,
        forward=replay,
        details={"path": "replay", "diffusers_unavailable": reason or ""},
    )


DIFFUSERS = register(
    Candidate(
        name="diffusers",
        description="diffusers MiniMaxH3AdaLayerNormModulation (op-for-op replay when diffusers is missing)",
        default_modes=None,
        availability=lambda: None,
        build=_build,
        suffix_mode=True,
    )
)
