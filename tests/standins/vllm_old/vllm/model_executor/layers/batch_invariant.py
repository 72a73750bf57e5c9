"""Stand-in for vLLM 0.12-0.28's vllm.model_executor.layers.batch_invariant (no disable function)."""
import os

import torch

import adaln_standin

_batch_invariant_MODE = False
_batch_invariant_LIB = None


def enable_batch_invariant_mode():
    global _batch_invariant_MODE, _batch_invariant_LIB
    adaln_standin.record("vllm", "enable_batch_invariant_mode", module=__name__)
    adaln_standin.maybe_fail("vllm")
    if _batch_invariant_MODE:
        return
    _batch_invariant_MODE = True
    # These releases also assign torch.bmm directly.
    _batch_invariant_LIB = adaln_standin.override_cpu(["aten::mean.dim", "aten::_log_softmax", "aten::bmm"])
    torch.bmm = adaln_standin.KERNELS["aten::bmm"]
    os.environ["CUBLAS_WORKSPACE_CONFIG"] = ":16:8"
    os.environ["CUBLASLT_WORKSPACE_SIZE"] = "1"
    torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
    torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
    if torch.cuda.is_available():
        torch.backends.cuda.preferred_blas_library(backend="cublaslt")
