"""timestep_sinusoid's candidates: diffusers' function (or its replay), SGLang's JIT kernel, RL-Kernel's op."""
from __future__ import annotations

from adaln_bench.ops.candidates import BuildContext, Candidate, Implementation, register
from adaln_bench.ops.frameworks import dist_version, sglang_file_details, sglang_jit_availability
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


SGLANG_SOURCE = "csrc/diffusion/timestep_embedding.cuh"  # under sglang/kernels/jit/, what load_jit compiles


def _build_sglang(ctx: BuildContext) -> Implementation:
    import importlib

    module = importlib.import_module(SGLANG_MODULE)
    fn = module.timestep_embedding
    details = sglang_file_details(module, f"sglang/kernels/jit/{SGLANG_SOURCE}")
    return Implementation(source=f"SGLang {details['sglang_version']} {SGLANG_MODULE}.timestep_embedding (JIT: nvcc, "
                          f"loaded through apache-tvm-ffi {dist_version('apache-tvm-ffi')})", has_backward=False,
                          forward=lambda t: fn(t, ctx.shape.frequency, flip_sin_to_cos=True, downscale_freq_shift=0.0),
                          details={"path": f"{SGLANG_MODULE}.timestep_embedding", **details})


SGLANG = register(Candidate(name="sglang", description="SGLang's timestep_embedding, compiled at first call "
                            "through apache-tvm-ffi with nvcc (forward only)", default_modes=("plain",),
                            availability=sglang_jit_availability(SGLANG_MODULE), build=_build_sglang, op=OP))

RL_KERNEL = register_rl_kernel(OP, "rl_engine.kernels.ops.cuda.h3.timestep_sinusoid", "H3TimestepSinusoidCudaOp",
                               lambda op: lambda t: op.forward(t, check_range=False), ".forward")
