"""Recipe modes: a cuBLAS/torch setting tested by itself, with no framework. The built-in recipe is here;
users add their own in a TOML file (`run --modes-file`, read by recipe_file.py), one table per recipe:

    [recipes.cublas_ws16]
    description = "cuBLAS with a 16 KiB x 8 workspace"
    env = { CUBLAS_WORKSPACE_CONFIG = ":16:8" }
    preferred_blas = "cublas"                 # cublas | cublaslt | default
    bf16_reduced_precision_reduction = false
    fp16_reduced_precision_reduction = false
    tf32_matmul = false
    tf32_cudnn = false
    deterministic_algorithms = false
"""
from __future__ import annotations

from adaln_bench.modes.mode_types import Mode, TorchSettings
from adaln_bench.modes.registry import register


CUBLASLT_WS1 = register(
    Mode(
        name="cublaslt_ws1",
        description="recipe: cuBLASLt preferred, CUBLASLT_WORKSPACE_SIZE=1, reduced-precision reductions off",
        kind="recipe",
        env={"CUBLASLT_WORKSPACE_SIZE": "1"},
        torch_settings=TorchSettings(
            preferred_blas="cublaslt",
            bf16_reduced_precision_reduction=False,
            fp16_reduced_precision_reduction=False,
        ),
        cuda_only=True,
    )
)
