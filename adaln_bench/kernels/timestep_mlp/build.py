"""The timestep-MLP kernel library: its recipe per target and its ctypes interface (no torch needed here).

Four sources (the C interface and elementwise kernels in ``mlp.cu``; the CUTLASS 3xTF32 GEMMs in ``gemm_tn.cu``,
``gemm_nn.cu`` and ``gemm_dw.cu``), one shared library per target architecture, built and cached by the kernel
toolchain (adaln_bench/kernels/toolchain: nvcc and CUTLASS found, sources compiled in parallel, cache folder
``timestep_mlp-<arch>-<key>``), loaded with ctypes through a plain C interface (no torch C++ ABI). Prebuild with
``python -m adaln_bench.kernels.timestep_mlp.build --arch sm_90a --arch sm_100a``.

Target: the toolchain's rule (9.0 -> sm_90a, 10.0 -> sm_100a, other capabilities from 8.0 -> their own). Every
target runs the same code (CUTLASS 2.x, mma.sync m16n8k8 TF32, the Ampere instruction set); the library refuses a
device of another capability (status wrong_arch).
"""
from __future__ import annotations

import ctypes
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from adaln_bench.kernels.toolchain import (CUTLASS, BuildError, Recipe, arch_for_capability, load_once, parse_arch,
                                           prebuild_main)
from adaln_bench.kernels.toolchain.c_calls import call_checked

HERE = Path(__file__).resolve().parent
SOURCES = (  # one line a file, the longest compile first
    "gemm_nn.cu",
    "gemm_tn.cu",
    "gemm_dw.cu",
    "mlp.cu",
)
HEADERS = ("gemm_3xtf32.cuh", "gemm_impl.cuh")
LIB_NAME = "libadaln_timestep_mlp.so"
ABI_VERSION = 1
FLAGS = ("-std=c++17", "-O3", "-DNDEBUG", "--expt-relaxed-constexpr", "-Xcompiler", "-fPIC",
         "-Xcompiler", "-fvisibility=hidden")
MIN_CC = 80  # mma.sync TF32

__all__ = ["BuildError", "Library", "Target", "load", "recipe", "target_for_arch", "target_for_capability"]


@dataclass(frozen=True)
class Target:
    arch: str  # e.g. "sm_90a"
    cc: int  # 10 * major + minor, exactly what the library runs on
    defines: tuple[str, ...] = ()  # experiment variants only (e.g. "TMLP_SPLIT_Y=8"); empty = the shipped recipe


def recipe(target: Target) -> Recipe:
    return Recipe(name="timestep_mlp", lib_name=LIB_NAME, abi=ABI_VERSION, arch=target.arch, folder=HERE,
                  sources=SOURCES, headers=HEADERS, flags=FLAGS,
                  defines=(f"TMLP_REQUIRED_CC={target.cc}", *target.defines), header_sets=(CUTLASS,),
                  notes=(("cc", target.cc),))


def target_for_arch(arch: str) -> Target:
    return Target(arch, parse_arch(arch))


def target_for_capability(major: int, minor: int) -> Target:
    arch = arch_for_capability(major, minor, MIN_CC, "mma.sync TF32")
    return Target(arch, parse_arch(arch))


_vp, _i64, _i32, _sz = ctypes.c_void_p, ctypes.c_int64, ctypes.c_int, ctypes.c_size_t
_TAIL = [_vp, _sz, _i64, _i64, _i64, _i64, _i32, _vp, ctypes.c_char_p, _i32]  # ws, bytes, T, F, H, D, dev, stream, err
_SIGNATURES = {"tmlp_forward": [*[_vp] * 8, *_TAIL], "tmlp_backward": [*[_vp] * 11, *_TAIL]}


class Library:
    """ctypes view of one built library. A launching call raises RuntimeError on a nonzero status (a failed call
    launched nothing after the failing step, so the error is an ordinary exception)."""

    def __init__(self, lib_path: Path, target: Target, meta: Optional[dict] = None):
        self.path, self.target, self.meta = lib_path, target, meta or {}
        L = self._lib = ctypes.CDLL(str(lib_path))
        L.tmlp_abi_version.restype = _i32
        L.tmlp_required_cc.restype = _i32
        L.tmlp_status_name.argtypes = [_i32]
        L.tmlp_status_name.restype = ctypes.c_char_p
        for name in ("tmlp_forward_workspace_bytes", "tmlp_backward_workspace_bytes"):
            getattr(L, name).argtypes = [_i64] * 4
            getattr(L, name).restype = _sz
        L.tmlp_splits.argtypes = [_i64, _i64, _i64, *[ctypes.POINTER(_i32)] * 3]
        L.tmlp_splits.restype = None
        L.tmlp_config_for.argtypes = [_i64]
        L.tmlp_config_for.restype = _i32
        L.tmlp_force_config.argtypes = [_i32]
        L.tmlp_force_config.restype = _i32
        L.tmlp_set_large_variant.argtypes = [_i32]
        L.tmlp_set_large_variant.restype = _i32
        for name, args in _SIGNATURES.items():
            getattr(L, name).argtypes = args
            getattr(L, name).restype = _i32
        if L.tmlp_abi_version() != ABI_VERSION:
            raise BuildError(f"{lib_path}: ABI version {L.tmlp_abi_version()}, expected {ABI_VERSION}")
        if L.tmlp_required_cc() != target.cc:
            raise BuildError(f"{lib_path}: built for cc {L.tmlp_required_cc()}, expected {target.cc}")

    def forward_workspace_bytes(self, t: int, f: int, h: int, d: int) -> int:
        return int(self._lib.tmlp_forward_workspace_bytes(t, f, h, d))

    def backward_workspace_bytes(self, t: int, f: int, h: int, d: int) -> int:
        return int(self._lib.tmlp_backward_workspace_bytes(t, f, h, d))

    def splits(self, f: int, h: int, d: int) -> dict:
        """The fixed K slices of y, d_act and dx at these sizes."""
        out = [_i32() for _ in range(3)]
        self._lib.tmlp_splits(f, h, d, *[ctypes.byref(v) for v in out])
        return dict(zip(("y", "d_act", "dx"), (v.value for v in out)))

    def config_for(self, t: int) -> int:
        """The row GEMMs' tile configuration at T: 0 small (64 x 32), 1 mid (64 x 64), 3 wide (64 x 128),
        2 large (128 x 128)."""
        return int(self._lib.tmlp_config_for(t))

    def force_config(self, c: int) -> int:
        """-1: by T (the default); 0..3: that tile configuration at every T (same bits: it is how a test proves
        the bits do not depend on it). Process-wide; returns the previous value."""
        old = int(self._lib.tmlp_force_config(c))
        if old == -2:
            raise ValueError(f"tile configuration must be -1 (by T) or 0..3, got {c}")
        return old

    def set_large_variant(self, v: int) -> int:
        """The large-T tile: 0 (default) 128 x 128 x 32, 1 128 x 64 x 32, 2 64 x 128 x 32. Same bits in each. Process-wide; returns the previous value."""
        old = int(self._lib.tmlp_set_large_variant(v))
        if old == -2:
            raise ValueError(f"large-T tile variant must be 0, 1 or 2, got {v}")
        return old

    def status_name(self, rc: int) -> str:
        return self._lib.tmlp_status_name(rc).decode()

    def call(self, name: str, *args) -> None:
        call_checked(getattr(self._lib, name), args, self.status_name, f"timestep_mlp kernel {name}")


def load(target: Target) -> Library:
    return load_once(recipe(target), lambda path, meta: Library(path, target, meta))


if __name__ == "__main__":
    sys.exit(prebuild_main("the timestep-MLP kernel library", lambda arch, _: recipe(target_for_arch(arch))))
