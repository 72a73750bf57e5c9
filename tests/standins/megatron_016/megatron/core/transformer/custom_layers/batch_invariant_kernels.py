"""Stand-in for megatron-core 0.16's batch_invariant_kernels: no backend argument, Triton only."""
import adaln_standin

_batch_invariant_MODE = False
_batch_invariant_LIB = None


def is_batch_invariant_mode_enabled():
    return _batch_invariant_MODE


def enable_batch_invariant_mode():
    global _batch_invariant_MODE, _batch_invariant_LIB
    adaln_standin.record("megatron-core", "enable_batch_invariant_mode")
    adaln_standin.maybe_fail("megatron-core")
    if _batch_invariant_MODE:
        return
    _batch_invariant_MODE = True
    _batch_invariant_LIB = adaln_standin.override_cpu(
        ["aten::mm", "aten::addmm", "aten::_log_softmax", "aten::mean.dim"]
    )


def disable_batch_invariant_mode():
    global _batch_invariant_MODE, _batch_invariant_LIB
    adaln_standin.record("megatron-core", "disable_batch_invariant_mode")
    if _batch_invariant_LIB is not None:
        _batch_invariant_LIB._destroy()
    _batch_invariant_MODE = False
    _batch_invariant_LIB = None
