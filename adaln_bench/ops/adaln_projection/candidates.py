"""The projection's candidates: diffusers' module (or the replay), the bundled CUDA kernel, RL-Kernel's op."""
from __future__ import annotations

import importlib

import torch

from adaln_bench.ops.adaln_projection import replay
from adaln_bench.ops.candidates import BuildContext, Candidate, Implementation, register
from adaln_bench.ops.rl_kernel import register_rl_kernel

OP = "adaln_projection"
MODULE_PATH = "diffusers.models.transformers.transformer_minimax_h3"
CLASS_NAME = "MiniMaxH3AdaLayerNormModulation"


def _diffusers_module():
    """The diffusers class, or the reason it cannot be had."""
    try:
        module = importlib.import_module(MODULE_PATH)
        return getattr(module, CLASS_NAME), None
    except Exception as exc:  # an optional dependency: any failure to import means "use the replay"
        return None, f"{type(exc).__name__}: {exc}"


def _module_forward(cls, ctx: BuildContext):
    """The module returns six (M·T, H) views of one (T, N) table; the harness compares tables, so the table
    itself is taken from the linear's output (no copy in the timings), with autograd flowing through."""
    with torch.device("meta"):
        module = cls(ctx.shape.dim, ctx.shape.hidden)
    # The module's linear holds 6 * 3 * H outputs; other modality counts get a linear of their size.
    module.linear = torch.nn.Linear(ctx.shape.dim, ctx.out_features, bias=True, device="meta")
    captured: list[torch.Tensor] = []
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


def _build_diffusers(ctx: BuildContext) -> Implementation:
    cls, reason = _diffusers_module()
    if cls is not None:
        return Implementation(source=f"diffusers {CLASS_NAME}, BF16 F.linear [{ctx.mode}]", has_backward=True,
                              forward=_module_forward(cls, ctx), details={"path": f"{MODULE_PATH}.{CLASS_NAME}"})
    return Implementation(
        source=f"replay of diffusers AdaLN projection (diffusers unavailable), BF16 F.linear [{ctx.mode}]",
        has_backward=True, forward=replay, details={"path": "replay", "diffusers_unavailable": reason or ""})


DIFFUSERS = register(Candidate(
    name="diffusers",
    description="diffusers MiniMaxH3AdaLayerNormModulation (op-for-op replay when diffusers is missing)",
    default_modes=None, availability=lambda: None, build=_build_diffusers, suffix_mode=True, op=OP))


def _bundled_availability():
    from adaln_bench.kernels.bundled.candidate import availability

    return availability()


def _build_bundled(ctx: BuildContext) -> Implementation:
    from adaln_bench.kernels.bundled.candidate import get_library, library_details, make_forward

    device = ctx.device if ctx.device.index is not None else torch.device("cuda", torch.cuda.current_device())
    lib = get_library(device)
    return Implementation(source=f"bundled CUDA kernel, {lib.path_name}", has_backward=True,
                          forward=make_forward(lib), details=library_details(lib, ctx.out_features))


BUNDLED = register(Candidate(
    name="bundled",
    description="this project's CUDA kernel: invariant by construction (tiles chosen by T only among "
                "bit-identical ones, no split-K by T, d_act chunks summed in an order fixed by N), fp32 d_temb",
    default_modes=("plain",), availability=_bundled_availability, build=_build_bundled, op=OP))

RL_KERNEL = register_rl_kernel(OP, "rl_engine.kernels.ops.cuda.h3.adaln_projection", "H3AdaLNProjectionCudaOp",
                               lambda op: op.forward_table, ".forward_table")
