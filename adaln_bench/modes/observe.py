"""What a mode's child process actually sees once the mode is on: proof that the switch took effect.

`dispatch_snapshot()` is taken after `import torch` and before the mode's `enable`; `observe()` after it.
An aten override registered from Python (`torch.library.Library("aten", "IMPL").impl(op, fn, "CUDA")`)
replaces the line of that dispatch key in `torch._C._dispatch_dump(op)` with one that names the Python
file that registered it, so the ops whose lines changed are the ops the mode overrode.
"""
from __future__ import annotations

import os
import warnings
from typing import Mapping, Optional

import torch

from adaln_bench.modes._import import file_sha256
from adaln_bench.modes.registry import Mode, Switch
from adaln_bench.datamodel.schema import ModeObservation

# The aten ops an AdaLN projection (and the batch-invariant libraries) can route through. Names without
# an overload are registered that way by the libraries (vLLM's "aten::softmax"), so both are watched.
WATCHED_OPS = (
    "aten::mm",
    "aten::mm.out",
    "aten::mm.dtype",
    "aten::addmm",
    "aten::addmm.out",
    "aten::bmm",
    "aten::bmm.out",
    "aten::matmul",
    "aten::linear",
    "aten::silu",
    "aten::_log_softmax",
    "aten::softmax",
    "aten::softmax.int",
    "aten::_softmax",
    "aten::mean.dim",
    "aten::sum.dim_IntList",
    "aten::rms_norm",
    "aten::_fused_rms_norm",
    "aten::native_layer_norm",
)

# Python-level replacements that bypass the dispatcher (vLLM and SGLang assign torch.bmm).
WATCHED_FUNCTIONS = {
    "torch.mm": lambda: torch.mm,
    "torch.addmm": lambda: torch.addmm,
    "torch.bmm": lambda: torch.bmm,
    "torch.matmul": lambda: torch.matmul,
    "torch.nn.functional.linear": lambda: torch.nn.functional.linear,
    "torch.nn.functional.silu": lambda: torch.nn.functional.silu,
}

# Dispatch keys whose kernels compute the result. Others (Meta, Python, Functionalize, FuncTorch*,
# Autocast*) get registrations from torch itself when subsystems load lazily, which is not the mode.
_COMPUTE_KEYS = frozenset(
    {
        "CPU",
        "CUDA",
        "XPU",
        "AutogradCPU",
        "AutogradCUDA",
        "AutogradXPU",
        "AutogradOther",
        "Autograd[alias]",
        "CompositeImplicitAutograd[alias]",
        "CompositeExplicitAutograd[alias]",
        "CompositeExplicitAutogradNonFunctional[alias]",
    }
)

# Variables that decide the cuBLAS and Triton paths, reported for every mode.
WATCHED_ENV = ("CUBLAS_WORKSPACE_CONFIG", "CUBLASLT_WORKSPACE_SIZE", "TRITON_F32_DEFAULT")


def _kernel_lines(op: str) -> str:
    try:
        dump = torch._C._dispatch_dump(op)  # "" for an op nobody registered
    except RuntimeError:  # an op this torch does not know
        return ""
    lines = (line for line in dump.splitlines() if line.split(":", 1)[0] in _COMPUTE_KEYS)
    return "\n".join(sorted(lines))


def dispatch_snapshot() -> dict[str, str]:
    """For each watched op and Python function, a text that changes when someone replaces its kernel."""
    snapshot = {op: _kernel_lines(op) for op in WATCHED_OPS}
    for name, get in WATCHED_FUNCTIONS.items():
        fn = get()
        snapshot[name] = f"{getattr(fn, '__module__', None)}.{getattr(fn, '__qualname__', fn)}@{id(fn):x}"
    return snapshot


def changed_entries(before: Mapping[str, str], after: Mapping[str, str]) -> list[str]:
    """The ops and functions whose snapshot differs, in the order they are watched."""
    return [name for name in after if before.get(name) != after[name]]


def _preferred_blas() -> Optional[str]:
    try:
        backend = torch.backends.cuda.preferred_blas_library()
    except Exception:  # builds and devices without a cuBLAS choice raise here
        return None
    name = getattr(backend, "name", None) or str(backend)
    return name.rsplit(".", 1)[-1].lower()


def _flag(read) -> Optional[bool]:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the TF32 getters warn that fp32_precision replaces them
            value = read()
    except Exception:
        return None
    return value if isinstance(value, bool) else None


def observe(mode: Mode, before: Mapping[str, str], switch: Optional[Switch],
            settings_restorable: bool = False) -> ModeObservation:
    """What this process sees now: the variables, torch's cuBLAS/TF32 settings, the overrides since `before`.

    `reference_mode_off` says how the FP64 reference runs: with the mode off (True), on because the switch has
    no off (False), or with nothing to switch (None); a recipe's torch settings (`settings_restorable`) are
    restored for it."""
    names = list(dict.fromkeys([*mode.env, *WATCHED_ENV]))
    matmul = torch.backends.cuda.matmul
    return ModeObservation(
        env_seen={name: os.environ.get(name) for name in names},
        preferred_blas=_preferred_blas(),
        bf16_reduced_precision_reduction=_flag(lambda: matmul.allow_bf16_reduced_precision_reduction),
        fp16_reduced_precision_reduction=_flag(lambda: matmul.allow_fp16_reduced_precision_reduction),
        tf32_matmul=_flag(lambda: matmul.allow_tf32),
        tf32_cudnn=_flag(lambda: torch.backends.cudnn.allow_tf32),
        float32_matmul_precision=torch.get_float32_matmul_precision(),
        deterministic_algorithms=_flag(torch.are_deterministic_algorithms_enabled),
        aten_overrides=changed_entries(before, dispatch_snapshot()),
        library=switch.library if switch else None,
        library_version=switch.library_version if switch else None,
        switch_path=switch.path if switch else None,
        reference_mode_off=(switch.off is not None) if switch else (True if settings_restorable else None),
        module_file=switch.module_file if switch else None,
        # Compared with the wheel's RECORD (tools/slim_frameworks.py check-report): a stand-in cannot pass.
        module_sha256=file_sha256(switch.module_file) if switch else None,
        matmul_path=switch.matmul_path if switch else None,
    )
