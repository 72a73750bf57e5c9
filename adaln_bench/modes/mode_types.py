"""What a mode is: its kind, environment, switch and torch settings, and the options a switch may need.

A mode is applied in two steps, both in its own child process: its environment variables are set
before torch is imported (cuBLAS reads them once per process), then `enable` runs after the import
and returns a `Switch` that says what it used and how to switch it off for the FP64 reference.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Literal, Mapping, Optional


ModeKind = Literal["baseline", "framework", "recipe"]


@dataclass(frozen=True)
class ModeOptions:
    """Options from the command line that a mode's switch may need."""

    megatron_src: Optional[str] = None


@dataclass
class Switch:
    """What switching a mode on did, and how to undo it for the FP64 reference."""

    path: Optional[str] = None  # the module or call used, e.g. "vllm.model_executor.layers.batch_invariant"
    library: Optional[str] = None
    library_version: Optional[str] = None
    off: Optional[Callable[[], None]] = None  # None: the mode has no switch-off
    on: Optional[Callable[[], None]] = None  # switch back on after the reference
    notes: dict[str, Optional[str]] = field(default_factory=dict)
    module_file: Optional[str] = None  # the file that defines the switch-on function (observe hashes it)
    matmul_path: Optional[str] = None  # which kernels the switch routes a bf16 mm to, where it tells


@dataclass(frozen=True)
class TorchSettings:
    """The torch-level knobs that decide which cuBLAS path a bf16 linear takes."""

    preferred_blas: Optional[Literal["cublas", "cublaslt", "default"]] = None
    bf16_reduced_precision_reduction: Optional[bool] = None
    fp16_reduced_precision_reduction: Optional[bool] = None
    tf32_matmul: Optional[bool] = None
    tf32_cudnn: Optional[bool] = None
    deterministic_algorithms: Optional[bool] = None

    def as_dict(self) -> dict[str, object]:
        return {k: v for k, v in self.__dict__.items() if v is not None}


@dataclass(frozen=True)
class Mode:
    name: str
    description: str
    kind: ModeKind
    env: Mapping[str, str] = field(default_factory=dict)
    # Runs in the child after `import torch`; raises when the mode cannot be switched on.
    enable: Optional[Callable[[ModeOptions], Switch]] = None
    torch_settings: Optional[TorchSettings] = None
    # The framework whose environment runs this mode (`adaln-bench envs`, modes/frameworks.py); None: any.
    framework: Optional[str] = None
    # Only means something on CUDA (a cuBLAS setting): skipped on the CPU unless named with --mode.
    cuda_only: bool = False


def env_problem(name: str, env: Mapping[str, object]) -> Optional[str]:
    """Why a mode's environment cannot be given to a child process, or None: checked before any child starts,
    so that a bad entry is one line, not a failure in the middle of the run."""
    for key, value in env.items():
        if not isinstance(key, str) or not key or "=" in key or "\0" in key:
            return f"mode {name!r}: environment variable name {key!r} is not valid (empty, or holds '=' or NUL)"
        if not isinstance(value, str):
            return f"mode {name!r}: environment variable {key} must be a string, not {type(value).__name__} {value!r}"
        if "\0" in value:
            return f"mode {name!r}: environment variable {key} holds a NUL character"
    return None
