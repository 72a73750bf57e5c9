"""Applying a recipe's torch settings in the child, and undoing them for the FP64 reference."""
from __future__ import annotations

from typing import Callable

from adaln_bench.modes.registry import TorchSettings


def _getters_setters(on_cuda: bool):
    import torch

    cuda = torch.backends.cuda
    table = {
        "bf16_reduced_precision_reduction": (
            lambda: cuda.matmul.allow_bf16_reduced_precision_reduction,
            lambda v: setattr(cuda.matmul, "allow_bf16_reduced_precision_reduction", v),
        ),
        "fp16_reduced_precision_reduction": (
            lambda: cuda.matmul.allow_fp16_reduced_precision_reduction,
            lambda v: setattr(cuda.matmul, "allow_fp16_reduced_precision_reduction", v),
        ),
        "tf32_matmul": (lambda: cuda.matmul.allow_tf32, lambda v: setattr(cuda.matmul, "allow_tf32", v)),
        "tf32_cudnn": (
            lambda: torch.backends.cudnn.allow_tf32,
            lambda v: setattr(torch.backends.cudnn, "allow_tf32", v),
        ),
        "deterministic_algorithms": (
            torch.are_deterministic_algorithms_enabled,
            lambda v: torch.use_deterministic_algorithms(v, warn_only=True),
        ),
    }
    if on_cuda:
        # Only meaningful (and only safe to query) where CUDA is initialised.
        table["preferred_blas"] = (
            lambda: str(cuda.preferred_blas_library()).split(".")[-1].lower(),
            lambda v: cuda.preferred_blas_library(v),
        )
    return table


def apply(settings: TorchSettings, on_cuda: bool) -> Callable[[], None]:
    """Set each given knob; return a function that puts every one back as it was."""
    table = _getters_setters(on_cuda)
    previous: dict[str, object] = {}
    for key, value in settings.as_dict().items():
        if key not in table:
            continue
        get, put = table[key]
        previous[key] = get()
        put(value)

    def restore() -> None:
        for key, value in previous.items():
            table[key][1](value)

    return restore
