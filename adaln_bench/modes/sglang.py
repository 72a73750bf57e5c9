"""The SGLang modes: `sglang.srt.batch_invariant_ops.enable_batch_invariant_mode()`, with and without
TRITON_F32_DEFAULT=ieee (SGLang's Triton dot otherwise takes fp32 inputs as TF32).

SGLang can switch its mode off (`disable_batch_invariant_mode()`), so the FP64 reference runs without it.
"""
from __future__ import annotations

import sys
from typing import Optional

from adaln_bench.modes._import import (
    defining_file,
    describe_call,
    import_first,
    library_version,
    module_file,
)
from adaln_bench.modes.registry import Mode, ModeOptions, Switch, register

MODULE_PATHS = ("sglang.srt.batch_invariant_ops",)
_KERNELS_MODULE = "sglang.srt.batch_invariant_ops.batch_invariant_ops"


def matmul_path() -> Optional[str]:
    """Where SGLang sends a bf16 mm: "deepgemm" or "triton_persistent"; None if its module does not say.

    SGLang decides at import: `ENABLE_JIT_DEEPGEMM` is true on SM >= 90 when deep_gemm imports, and
    `_ENABLE_MM_DEEPGEMM` (SGLANG_BATCH_INVARIANT_OPS_ENABLE_MM_DEEPGEMM, default on) lets mm use it.
    The AdaLN product (contiguous bf16, 16-byte aligned rows) then takes DeepGEMM; otherwise Triton.
    """
    kernels = sys.modules.get(_KERNELS_MODULE)
    if kernels is None or not hasattr(kernels, "ENABLE_JIT_DEEPGEMM"):
        return None
    deepgemm = bool(getattr(kernels, "ENABLE_JIT_DEEPGEMM")) and bool(getattr(kernels, "_ENABLE_MM_DEEPGEMM", True))
    return "deepgemm" if deepgemm else "triton_persistent"


def enable(options: ModeOptions) -> Switch:
    module = import_first("sglang", "sglang", MODULE_PATHS)
    switch_on = module.enable_batch_invariant_mode
    switch_off = module.disable_batch_invariant_mode
    switch_on()
    source = defining_file(switch_on)
    path = matmul_path()
    notes = {"module_file": module_file(module)}
    if path is not None:
        notes["bf16_mm_deepgemm"] = str(path == "deepgemm").lower()
    return Switch(
        path=describe_call(module, "enable_batch_invariant_mode"),
        library="sglang",
        library_version=library_version("sglang", "sglang", "sglang.version"),
        off=switch_off,
        on=switch_on,
        notes=notes,
        module_file=source,
        matmul_path=path,
    )


SGLANG = register(
    Mode(
        name="sglang",
        description="SGLang enable_batch_invariant_mode(): Triton (or DeepGEMM) overrides of aten mm, addmm, bmm, ...",
        kind="framework",
        framework="sglang",
        enable=enable,
    )
)

SGLANG_IEEE = register(
    Mode(
        name="sglang_ieee",
        description="as sglang, with TRITON_F32_DEFAULT=ieee: fp32 Triton dots in IEEE fp32, not TF32",
        kind="framework",
        framework="sglang",
        env={"TRITON_F32_DEFAULT": "ieee"},
        enable=enable,
    )
)
