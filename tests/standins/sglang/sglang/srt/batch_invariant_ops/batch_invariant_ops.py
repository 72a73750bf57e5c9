"""Stand-in for SGLang's batch_invariant_ops: CPU overrides of mm, addmm, _log_softmax, mean.dim, bmm."""
import os

import torch

import adaln_standin

if os.environ.get("ADALN_STANDIN_BROKEN_IMPORT") == "sglang":
    import deep_gemm_not_installed  # noqa: F401  # a dependency missing inside a module that exists

# SGLang sets these at import: DeepGEMM on SM >= 90 when deep_gemm imports (the test says whether it does),
# and mm may use it unless SGLANG_BATCH_INVARIANT_OPS_ENABLE_MM_DEEPGEMM is off.
ENABLE_JIT_DEEPGEMM = os.environ.get("ADALN_STANDIN_DEEPGEMM") == "1"
_ENABLE_MM_DEEPGEMM = os.environ.get("SGLANG_BATCH_INVARIANT_OPS_ENABLE_MM_DEEPGEMM", "1") not in ("0", "false")

_batch_invariant_MODE = False
_batch_invariant_LIB = None
_original_torch_bmm = None


def is_batch_invariant_mode_enabled():
    return _batch_invariant_MODE


def enable_batch_invariant_mode(enable_bmm: bool = True):
    global _batch_invariant_MODE, _batch_invariant_LIB, _original_torch_bmm
    adaln_standin.record("sglang", "enable_batch_invariant_mode", enable_bmm=enable_bmm)
    adaln_standin.maybe_fail("sglang")
    if _batch_invariant_MODE:
        return
    _batch_invariant_MODE = True
    ops = ["aten::mm", "aten::addmm", "aten::_log_softmax", "aten::mean.dim"]
    _batch_invariant_LIB = adaln_standin.override_cpu(ops + (["aten::bmm"] if enable_bmm else []))
    if enable_bmm:
        _original_torch_bmm = torch.bmm
        torch.bmm = adaln_standin.KERNELS["aten::bmm"]


def disable_batch_invariant_mode():
    global _batch_invariant_MODE, _batch_invariant_LIB, _original_torch_bmm
    adaln_standin.record("sglang", "disable_batch_invariant_mode")
    if _batch_invariant_LIB is not None:
        _batch_invariant_LIB._destroy()
    if _original_torch_bmm is not None:
        torch.bmm = _original_torch_bmm
        _original_torch_bmm = None
    _batch_invariant_MODE = False
    _batch_invariant_LIB = None
