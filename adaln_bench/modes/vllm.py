"""The vLLM mode: vLLM's `enable_batch_invariant_mode()`, with the cuBLAS variables it relies on set first.

vLLM has no switch-off, so the FP64 reference of this mode runs with the mode on (the report says so).
The module moved in vLLM 0.29: `vllm.model_executor.layers.batch_invariant` in 0.12 to 0.28,
`vllm.model_executor.determinism.batch_invariant` from 0.29 on (docs/compat.md).
"""
from __future__ import annotations

from adaln_bench.modes._import import (
    defining_file,
    describe_call,
    import_first,
    library_version,
    module_file,
)
from adaln_bench.modes.registry import Mode, ModeOptions, Switch, register

MODULE_PATHS = (
    "vllm.model_executor.determinism.batch_invariant",  # 0.29 and later
    "vllm.model_executor.layers.batch_invariant",  # 0.12 to 0.28
)

# On Hopper and Blackwell the switch sets these in os.environ after torch is imported; cuBLAS may
# already have read them by then, so the child has them from the start.
ENV = {"CUBLAS_WORKSPACE_CONFIG": ":16:8", "CUBLASLT_WORKSPACE_SIZE": "1"}


def enable(options: ModeOptions) -> Switch:
    module = import_first("vllm", "vllm", MODULE_PATHS)
    module.enable_batch_invariant_mode()
    source = defining_file(module.enable_batch_invariant_mode)
    return Switch(
        path=describe_call(module, "enable_batch_invariant_mode"),
        library="vllm",
        library_version=library_version("vllm", "vllm"),
        off=None,
        on=None,
        notes={"module_file": module_file(module)},
        module_file=source,
    )


VLLM = register(
    Mode(
        name="vllm",
        description=(
            "vLLM enable_batch_invariant_mode() with CUBLAS_WORKSPACE_CONFIG=:16:8, "
            "CUBLASLT_WORKSPACE_SIZE=1; no switch-off"
        ),
        kind="framework",
        framework="vllm",
        env=ENV,
        enable=enable,
    )
)
