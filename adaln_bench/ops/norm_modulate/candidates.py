"""norm_modulate's candidates: the stock composition, torch's rms_norm alone, Liger's modulated RMSNorm twice
(rows by index_select, and by a fixed-order gather), Transformer Engine's RMSNorm, SGLang's fused kernel, the
bundled kernel, RL-Kernel's op. Names as RL-Kernel's reports name them, so that `fidelity` pairs them."""
from __future__ import annotations

import importlib

import torch
import torch.nn.functional as F

from adaln_bench.ops.bundled import register_bundled
from adaln_bench.ops.candidates import BuildContext, Candidate, Implementation, register
from adaln_bench.ops.frameworks import needs_cuda_and, sglang_cutedsl_availability, sglang_file_details
from adaln_bench.ops.gathered import EPS, ordered_gather, rms_norm64
from adaln_bench.ops.norm_modulate import replay
from adaln_bench.ops.rl_kernel import register_rl_kernel
from adaln_bench.ops.stock_candidate import register_replay

OP = "norm_modulate"
LIGER = "liger_kernel.ops.modulated_rms_norm"
TE = "transformer_engine.pytorch"
SGLANG = "sglang.kernels.ops.diffusion.norm.scale_residual_norm_cutedsl"


def _version(dist: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:
        return "?"


DIFFUSERS = register_replay(OP, replay, "composition (F.rms_norm + index_select modulation)")


def _build_torch_rms_norm(ctx: BuildContext) -> Implementation:
    return Implementation(source="torch F.rms_norm (no modulation)", has_backward=True,
                          forward=lambda x, w: F.rms_norm(x, (x.shape[-1],), w, EPS), details={"path": "F.rms_norm"})


TORCH_RMS_NORM = register(Candidate(
    name="torch_rms_norm", description="torch's F.rms_norm alone (x and w; no modulation)", default_modes=None,
    availability=lambda: None, build=_build_torch_rms_norm, op=OP, inputs=("x", "w"), grads=("x", "w"),
    reference=rms_norm64))


def _liger(gather, what: str):
    def build(ctx: BuildContext) -> Implementation:
        fn = importlib.import_module(LIGER).LigerModulatedRMSNormFunction

        def forward(x, w, sh, sc, idx):
            return fn.apply(x, w, gather(sc, idx), gather(sh, idx), EPS, 0.0, "llama", False)

        return Implementation(source=f"Liger {_version('liger-kernel')} modulated RMSNorm + {what}",
                              has_backward=True, forward=forward,
                              details={"path": f"{LIGER}.LigerModulatedRMSNormFunction", "gather": what})

    return build


LIGER_INDEX_SELECT = register(Candidate(
    name="liger", description="Liger's modulated RMSNorm, its rows gathered by index_select", default_modes=("plain",),
    availability=needs_cuda_and(LIGER, "liger-kernel"), build=_liger(lambda t, i: t.index_select(0, i),
                                                                     "index_select"), op=OP))
LIGER_ORDERED = register(Candidate(
    name="liger_ordered_gather", description="Liger's modulated RMSNorm, its rows gathered by a gather whose backward "
    "is a fixed-order fp32 sum (no atomics)", default_modes=("plain",),
    availability=needs_cuda_and(LIGER, "liger-kernel"), build=_liger(ordered_gather, "fixed-order gather"), op=OP))


def _build_te(ctx: BuildContext) -> Implementation:
    te = importlib.import_module(TE)
    norm = te.RMSNorm(ctx.shape.hidden, eps=EPS, params_dtype=torch.bfloat16, device=ctx.device)

    def forward(x, w):
        with torch.no_grad():
            norm.weight.copy_(w)  # the weight copied in: TE's module owns its parameter, so dx only
        return norm(x)

    return Implementation(source=f"TE {_version('transformer_engine')} RMSNorm (no modulation)", has_backward=True,
                          forward=forward, details={"path": f"{TE}.RMSNorm"})


TRANSFORMER_ENGINE = register(Candidate(
    name="transformer_engine", description="Transformer Engine's RMSNorm (weight copied in; dx only)",
    default_modes=("plain",), availability=needs_cuda_and(TE, "transformer-engine"), build=_build_te, op=OP,
    inputs=("x", "w"), grads=("x",), reference=rms_norm64))


def _build_sglang(ctx: BuildContext) -> Implementation:
    module = importlib.import_module(SGLANG)
    fn = module.fused_norm_scale_shift
    details = sglang_file_details(module)

    def forward(x, w, sh, sc, idx):
        rows_sc, rows_sh = sc.index_select(0, idx), sh.index_select(0, idx)
        return fn(x[None], w, None, rows_sc[None], rows_sh[None], "rms", EPS)[0]

    return Implementation(source=f"SGLang {details['sglang_version']} {SGLANG}.fused_norm_scale_shift (CuTe DSL, "
                          f"nvidia-cutlass-dsl {_version('nvidia-cutlass-dsl')}; forward only)",
                          has_backward=False, forward=forward,
                          details={"path": f"{SGLANG}.fused_norm_scale_shift", **details})


SGLANG_FUSED = register(Candidate(
    name="sglang", description="SGLang's fused_norm_scale_shift (CuTe DSL, forward only)", default_modes=("plain",),
    availability=sglang_cutedsl_availability(SGLANG), build=_build_sglang, op=OP))

BUNDLED = register_bundled(OP, "norm_modulate")
RL_KERNEL = register_rl_kernel(OP, "rl_engine.kernels.ops.cuda.h3.rms_norm", "H3RMSNormCudaOp",
                               lambda op: op.forward_modulated, ".forward_modulated")
