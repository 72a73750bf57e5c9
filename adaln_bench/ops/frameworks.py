"""Availability of candidates that come from other libraries (Liger, Transformer Engine, SGLang's kernels):
cheap checks, each giving the reason a candidate cannot run here."""
from __future__ import annotations

import importlib.util
from typing import Callable, Optional


def _cuda_reason() -> Optional[str]:
    import torch

    return None if torch.cuda.is_available() else "no CUDA device"


def module_reason(module: str, what: str) -> Optional[str]:
    """None when `module` can be found, else why not (the missing top-level package, with `what` it is)."""
    try:
        found = importlib.util.find_spec(module) is not None
    except ModuleNotFoundError as exc:
        return f"ModuleNotFoundError: No module named {exc.name!r} ({what} is not installed)"
    except Exception as exc:  # noqa: BLE001 - a package whose __init__ fails to import
        return f"{type(exc).__name__}: {exc}"
    return None if found else f"ModuleNotFoundError: No module named {module!r} ({what} is not installed)"


def needs_cuda_and(module: str, what: str) -> Callable[[], Optional[str]]:
    """A GPU library's candidate: CUDA first, then the module."""

    def check() -> Optional[str]:
        return _cuda_reason() or module_reason(module, what)

    return check


def sglang_kernel_availability(module: str) -> Callable[[], Optional[str]]:
    return needs_cuda_and(module, "SGLang")
