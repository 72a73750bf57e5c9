"""timestep_sinusoid's candidates: diffusers' function (or its replay), SGLang's JIT kernel, RL-Kernel's op."""
from __future__ import annotations

from adaln_bench.ops.candidates import BuildContext, Candidate, Implementation, register
from adaln_bench.ops.frameworks import sglang_kernel_availability
from adaln_bench.ops.rl_kernel import register_rl_kernel
from adaln_bench.ops.stock_candidate import register_stock
from adaln_bench.ops.timestep_sinusoid import replay

OP = "timestep_sinusoid"
SGLANG_MODULE = "sglang.kernels.ops.diffusion.modulate.timestep_embedding_jit"


def _diffusers(fn, ctx: BuildContext):
    return lambda t: fn(t, ctx.shape.frequency, flip_sin_to_cos=True, downscale_freq_shift=0)


DIFFUSERS = register_stock(OP, "diffusers.models.embeddings", "get_timestep_embedding", _diffusers,
                           lambda ctx: lambda t: replay(t, ctx.shape.frequency),
                           "get_timestep_embedding (flip_sin_to_cos, shift 0)")


def _build_sglang(ctx: BuildContext) -> Implementation:
    import importlib

    fn = importlib.import_module(SGLANG_MODULE).timestep_embedding
    return Implementation(source="sglang timestep_embedding (JIT)", has_backward=False,
                          forward=lambda t: fn(t, ctx.shape.frequency, flip_sin_to_cos=True, downscale_freq_shift=0.0),
                          details={"path": f"{SGLANG_MODULE}.timestep_embedding"})


SGLANG = register(Candidate(name="sglang", description="SGLang's timestep_embedding, compiled at first call "
                            "through apache-tvm-ffi with nvcc (forward only)", default_modes=("plain",),
                            availability=sglang_kernel_availability(SGLANG_MODULE), build=_build_sglang, op=OP))

RL_KERNEL = register_rl_kernel(OP, "rl_engine.kernels.ops.cuda.h3.timestep_sinusoid", "H3TimestepSinusoidCudaOp",
                               lambda op: lambda t: op.forward(t, check_range=False), ".forward")
