"""Stand-in for Megatron main's batch_invariant_kernels: enable_batch_invariant_mode(backend=, collective=).

"triton" overrides mm/addmm (and _log_softmax, mean.dim); "te_native" overrides no aten op: in Megatron it
starves cuBLASLt's workspace (CUBLASLT_WORKSPACE_SIZE=0) and routes Transformer Engine's own GEMMs.
"""
import os

import adaln_standin

# A revision of main between 0.16 and te_native accepted only ("deepgemm", "triton"): the test can ask for it.
_BACKENDS = tuple(os.environ.get("ADALN_STANDIN_MEGATRON_BACKENDS", "triton,te_native,deepgemm").split(","))

_batch_invariant_MODE = False
_batch_invariant_LIB = None
_BACKEND = None


def is_batch_invariant_mode_enabled():
    return _batch_invariant_MODE


def get_batch_invariant_backend():
    return _BACKEND


def enable_batch_invariant_mode(backend: str = "triton", collective: str = "ordered"):
    global _batch_invariant_MODE, _batch_invariant_LIB, _BACKEND
    adaln_standin.record("megatron-core", "enable_batch_invariant_mode", backend=backend, collective=collective)
    adaln_standin.maybe_fail("megatron-core")
    if backend not in _BACKENDS:
        raise ValueError(f"Unknown batch-invariant backend {backend!r}; expected one of {_BACKENDS}")
    if _batch_invariant_MODE:
        return
    _batch_invariant_MODE = True
    _BACKEND = backend
    if backend == "triton":
        _batch_invariant_LIB = adaln_standin.override_cpu(
            ["aten::mm", "aten::addmm", "aten::_log_softmax", "aten::mean.dim"]
        )


def disable_batch_invariant_mode():
    global _batch_invariant_MODE, _batch_invariant_LIB, _BACKEND
    adaln_standin.record("megatron-core", "disable_batch_invariant_mode")
    if _batch_invariant_LIB is not None:
        _batch_invariant_LIB._destroy()
    _batch_invariant_MODE = False
    _batch_invariant_LIB = None
    _BACKEND = None
