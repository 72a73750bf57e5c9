"""The gathered-operator kernel library: its recipe per target and its ctypes interface (no torch needed here).

One source (``gathered.cu``), one nvcc call, one shared library per target architecture, built and cached by the
kernel toolchain (adaln_bench/kernels/toolchain; cache folder ``gathered-<arch>-<key>``) and loaded with ctypes
through a plain C interface (no torch C++ ABI). It needs no CUTLASS. Prebuild with
``python -m adaln_bench.kernels.gathered.build --arch sm_90a --arch sm_100a``.

Target: the toolchain's rule (9.0 -> sm_90a, 10.0 -> sm_100a, other capabilities from 8.0 -> their own). The
kernels use nothing architecture-specific; the library refuses a device of another capability (status wrong_arch).
"""
from __future__ import annotations

import ctypes
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from adaln_bench.kernels.toolchain import (BuildError, Recipe, arch_for_capability, load_once, parse_arch,
                                           prebuild_main)
from adaln_bench.kernels.toolchain.c_calls import call_checked

HERE = Path(__file__).resolve().parent
SOURCES = ("gathered.cu",)
HEADERS = ("norm_onepass.cuh",)  # included by gathered.cu
LIB_NAME = "libadaln_gathered.so"
ABI_VERSION = 4
FLAGS = ("-std=c++17", "-O3", "-DNDEBUG", "-Xcompiler", "-fPIC", "-Xcompiler", "-fvisibility=hidden")
MIN_CC = 80

# op codes of gat_workspace_bytes / gat_chunking
OP_ROW_GATHER, OP_NORM, OP_GATE = 0, 1, 2


@dataclass(frozen=True)
class Target:
    arch: str  # e.g. "sm_90a"
    cc: int  # 10 * major + minor, exactly what the library runs on


def recipe(target: Target) -> Recipe:
    return Recipe(name="gathered", lib_name=LIB_NAME, abi=ABI_VERSION, arch=target.arch, folder=HERE,
                  sources=SOURCES, headers=HEADERS, flags=FLAGS, defines=(f"GAT_REQUIRED_CC={target.cc}",),
                  notes=(("cc", target.cc),))


def target_for_arch(arch: str) -> Target:
    return Target(arch, parse_arch(arch))


def target_for_capability(major: int, minor: int) -> Target:
    arch = arch_for_capability(major, minor, MIN_CC)
    return Target(arch, parse_arch(arch))


_vp, _i64, _i32, _sz, _f32 = ctypes.c_void_p, ctypes.c_int64, ctypes.c_int, ctypes.c_size_t, ctypes.c_float
_ERR = [ctypes.c_char_p, ctypes.c_int]  # message buffer and its length, last on every launching call
_DEV = [_i64, _i64, _i32, _vp]  # S, H, device, stream

_SIGNATURES = {
    "gat_row_gather_fwd": [_vp, _vp, _vp, *[_vp] * 6, *_DEV],
    "gat_row_gather_bwd": [*[_vp] * 6, _vp, _vp, _vp, _vp, _sz, *_DEV],
    "gat_norm_fwd": [_vp, _vp, _vp, _vp, _i64, _vp, _i32, _vp, _vp, _i64, _i64, _f32, _i32, _vp],
    "gat_norm_bwd": [_vp, _vp, _vp, _vp, _i64, _vp, _i32, _vp, _vp, _vp, _vp, _vp, _i64, _vp, _sz, *_DEV],
    "gat_gate_fwd": [_vp, _vp, _vp, _vp, _vp, *_DEV],
    "gat_gate_bwd": [_vp, _vp, _vp, _vp, _vp, _vp, _vp, _sz, *_DEV],
}


class Library:
    """ctypes view of one built library. Every launching call raises RuntimeError on a nonzero status (a failed
    call launched nothing after the failing step, so the error is an ordinary exception)."""

    def __init__(self, lib_path: Path, target: Target, meta: Optional[dict] = None):
        self.path, self.target, self.meta = lib_path, target, meta or {}
        L = self._lib = ctypes.CDLL(str(lib_path))
        L.gat_abi_version.restype = ctypes.c_int
        L.gat_required_cc.restype = ctypes.c_int
        L.gat_status_name.argtypes = [ctypes.c_int]
        L.gat_status_name.restype = ctypes.c_char_p
        L.gat_workspace_bytes.argtypes = [_i32, _i64, _i64, _i32]
        L.gat_workspace_bytes.restype = _sz
        L.gat_chunking.argtypes = [_i32, _i64, _i32, ctypes.POINTER(_i64), ctypes.POINTER(_i64)]
        L.gat_chunking.restype = None
        L.gat_row_threads.argtypes = [_i64]
        L.gat_row_threads.restype = ctypes.c_int
        L.gat_norm_backward_path.argtypes = [_i64]
        L.gat_norm_backward_path.restype = ctypes.c_int
        L.gat_onepass_tiling.argtypes = [_i64, _i64, _i32, *[ctypes.POINTER(_i64)] * 3]
        L.gat_onepass_tiling.restype = None
        L.gat_onepass_ring.argtypes = [_i64, _i64]
        L.gat_onepass_ring.restype = ctypes.c_int
        for name, args in _SIGNATURES.items():
            fn = getattr(L, name)
            fn.argtypes = [*args, *_ERR]
            fn.restype = ctypes.c_int
        if L.gat_abi_version() != ABI_VERSION:
            raise BuildError(f"{lib_path}: ABI version {L.gat_abi_version()}, expected {ABI_VERSION}")
        if L.gat_required_cc() != target.cc:
            raise BuildError(f"{lib_path}: built for cc {L.gat_required_cc()}, expected {target.cc}")

    def workspace_bytes(self, op: int, s: int, h: int, ne: int = 9) -> int:
        return int(self._lib.gat_workspace_bytes(op, s, h, ne))

    def chunking(self, op: int, s: int, ne: int = 9) -> tuple[int, int]:
        """(chunks C, lane length L) of the column reduction over S tokens: 8·C lanes of L tokens."""
        c, l = _i64(), _i64()
        self._lib.gat_chunking(op, s, ne, ctypes.byref(c), ctypes.byref(l))
        return c.value, l.value

    def norm_backward_path(self, h: int) -> int:
        """The norm backward a call at this H runs: 2 (one pass, H <= 6144) or 1 (two passes, wider rows)."""
        return int(self._lib.gat_norm_backward_path(h))

    def onepass_tiling(self, s: int, h: int, ne: int = 9) -> tuple[int, int, int]:
        """(tile rows T, count blocks, tokens a count block) of the one-pass backward at S tokens."""
        out = [_i64() for _ in range(3)]
        self._lib.gat_onepass_tiling(s, h, ne, *[ctypes.byref(v) for v in out])
        return tuple(v.value for v in out)

    def onepass_ring(self, h: int, smem_optin: int) -> int:
        """The rows a one-pass call at H stages on a device with `smem_optin` bytes of shared memory per block."""
        return int(self._lib.gat_onepass_ring(h, smem_optin))

    def status_name(self, rc: int) -> str:
        return self._lib.gat_status_name(rc).decode()

    def call(self, name: str, *args) -> None:
        call_checked(getattr(self._lib, name), args, self.status_name, f"gathered kernel {name}")


def load(target: Target) -> Library:
    return load_once(recipe(target), lambda path, meta: Library(path, target, meta))


if __name__ == "__main__":
    sys.exit(prebuild_main("the gathered-operator kernel library", lambda arch, _: recipe(target_for_arch(arch))))
