"""The `--device auto|cuda|cpu` option that `run`, `modes` and `env` share."""
from __future__ import annotations

from adaln_bench.errors import UserError


def resolve_device(device: str) -> str:
    """cuda or cpu; auto is cuda where torch sees a CUDA device. Asking for cuda without one is a user error."""
    import torch

    if device not in ("auto", "cuda", "cpu"):
        raise UserError(f"--device must be auto, cuda or cpu, not {device!r}")
    has_cuda = torch.cuda.is_available()
    if device == "cuda" and not has_cuda:
        raise UserError("--device cuda: no CUDA device is available here (torch.cuda.is_available() is False)")
    if device == "auto":
        return "cuda" if has_cuda else "cpu"
    return device
