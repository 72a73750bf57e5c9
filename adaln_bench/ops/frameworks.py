"""Availability of candidates that come from other libraries (Liger, Transformer Engine, SGLang's kernels):
cheap checks, each giving the reason a candidate cannot run here."""
from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
from pathlib import Path
from typing import Callable, Optional

# What SGLang 0.5.23 pins for its two AdaLN kernels (its METADATA: apache-tvm-ffi==0.1.11,
# nvidia-cutlass-dsl[cu13]==4.8.0). tools/slim/sglang_kernels.py stages the first, not the second.
TVM_FFI = "apache-tvm-ffi 0.1.11"
CUTLASS_DSL_NOT_STAGED = (
    "nvidia-cutlass-dsl 4.8.0[cu13], SGLang 0.5.23's pin for its CuTe DSL kernels, is not installed; the "
    "sglang-kernels staging leaves it out: its wheels are 92.2 MiB and unpack to 244.1 MiB, and xz -9e takes its "
    "MLIR library (_cutlass_ir.cu13, 184.2 MiB) to 47.8 MiB and its runtime (libcute_dsl_runtime, 41.6 MiB) to "
    "12.8 MiB: with its other three wheels (4.5 MiB), more than the 64 MiB one device call carries before the "
    "working tree (docs/compat.md)")


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


def _spec_reason(name: str, why: str) -> Optional[str]:
    """A package looked up without running it (find_spec imports only the parents of a dotted name)."""
    try:
        found = importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:
        found = False
    return None if found else f"ModuleNotFoundError: No module named {name!r} ({why})"


def _sglang_module_reason(module: str) -> Optional[str]:
    """The kernel module itself, once `sglang` is there: an SGLang install without it is not 'not installed'."""
    try:
        found = importlib.util.find_spec(module) is not None
        missing = None if found else module
    except ModuleNotFoundError as exc:
        missing = exc.name or module
    except Exception as exc:  # noqa: BLE001 - sglang/__init__.py or a parent package fails to import
        return f"{type(exc).__name__}: {exc}"
    if missing is None:
        return None
    if missing == "sglang" or missing.startswith("sglang."):
        return (f"ModuleNotFoundError: No module named {missing!r} (this SGLang install lacks the kernel: the sglang "
                "mode's slimmed install carries only what its switch imports; `tools/slim_frameworks.py kernels "
                "build` stages SGLang with its kernels)")
    return f"ModuleNotFoundError: No module named {missing!r} (a dependency of {module})"


DEFAULT_NVCC = Path("/usr/local/cuda/bin/nvcc")  # toolchain.cuda_home()'s last resort


def _nvcc_reason() -> Optional[str]:
    """SGLang's JIT compiles with $CUDA_HOME/bin/nvcc, else the nvcc on PATH (its toolchain.cuda_home())."""
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    if home is not None:
        nvcc = Path(home) / "bin" / "nvcc"
        return None if nvcc.is_file() else f"{nvcc} not found (CUDA_HOME is set; SGLang's JIT kernel compiles with it)"
    if shutil.which("nvcc") or DEFAULT_NVCC.is_file():
        return None
    return "nvcc not found (neither CUDA_HOME nor PATH has it; SGLang's JIT kernel compiles at its first call)"


def sglang_jit_availability(module: str) -> Callable[[], Optional[str]]:
    """An SGLang kernel compiled at first call (ninja + nvcc) and loaded through apache-tvm-ffi."""

    def check() -> Optional[str]:
        return (_cuda_reason() or _spec_reason("sglang", "SGLang is not installed")
                or _spec_reason("tvm_ffi", f"{TVM_FFI}, which SGLang's JIT kernels load through, is not installed")
                or _nvcc_reason() or _sglang_module_reason(module))

    return check


def sglang_cutedsl_availability(module: str) -> Callable[[], Optional[str]]:
    """An SGLang kernel written in the CuTe DSL (nvidia-cutlass-dsl, cuda-bindings, compiled through tvm-ffi)."""

    def check() -> Optional[str]:
        return (_cuda_reason() or _spec_reason("sglang", "SGLang is not installed")
                or _spec_reason("cutlass", CUTLASS_DSL_NOT_STAGED)
                or _spec_reason("cuda.bindings", "cuda-bindings, which the CuTe DSL needs, is not installed")
                or _spec_reason("tvm_ffi", f"{TVM_FFI}, which the kernel is compiled for, is not installed")
                or _sglang_module_reason(module))

    return check


def dist_version(name: str) -> str:
    """The installed version of distribution `name`, or "?"."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return "?"


def sglang_file_details(module: object, *sources: str) -> dict[str, str]:
    """The SGLang files a built candidate runs, for its report: the module and any kernel source it compiles
    (paths from `sglang/` on, as in the wheel's RECORD, with their SHA-256), and the installed version."""
    file = Path(getattr(module, "__file__", "") or "").resolve()
    parts = file.parts
    top = max((i for i, p in enumerate(parts) if p == "sglang"), default=None)
    details = {"sglang_version": dist_version("sglang")}
    if top is None:
        return details
    root = Path(*parts[:top])
    for key, path in (("module", file), *((f"source{i}", root / s) for i, s in enumerate(sources))):
        rel = path.relative_to(root).as_posix()
        details[f"{key}_file"] = rel
        details[f"{key}_sha256"] = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else "missing"
    return details
