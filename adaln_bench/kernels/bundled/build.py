"""The bundled projection kernel library: its recipe per code path and target, and its ctypes interface.

One shared library per code path and target architecture, compiled from the sources beside this file with
CUTLASS/CuTe headers (PyPI `nvidia-cutlass`) by the kernel toolchain (adaln_bench/kernels/toolchain: nvcc, flags,
cache, atomic build), and loaded with ctypes. It exports a plain C interface (see api.cu), so it does not depend
on torch's C++ ABI and can be compiled on a machine without a GPU and carried to one. Cache folder:
``bundled-<path>-<arch>-<key>``. Prebuild with ``python -m adaln_bench.kernels.bundled.build --arch sm_90a``.

The code path is chosen by the device's architecture only (never by the batch): compute capability 9.0 ->
"sm90" (wgmma, sm_90a); every other capability from 8.0 -> "portable" (mma.sync) for that device's target
(sm_100a on a B200). ``ADALN_BENCH_BUNDLED_PATH=portable`` forces the portable path (to test it on Hopper).
"""
from __future__ import annotations

import argparse
import ctypes
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from adaln_bench.kernels.toolchain import (CUTLASS, BuildError, Recipe, arch_for_capability, load_once, parse_arch,
                                           prebuild_main)
from adaln_bench.kernels.toolchain import cache_key as _recipe_key

__all__ = ["BuildError", "Library", "Target", "cache_key", "load", "recipe", "target_for_arch",
           "target_for_capability"]

HERE = Path(__file__).resolve().parent
ABI_VERSION = 3  # 2: entry points take the device index; adaln_status_name. 3: chunk groups in adaln_chunking
# A library of the previous ABI still loads (kernel-bench compares against another commit's build).
READABLE_ABI_VERSIONS = (2, ABI_VERSION)
LIB_NAME = "libadaln_bundled.so"
MIN_CC = 80  # mma.sync on bf16

COMMON_HEADERS = ("gemms.h", "status.h", "cutlass_run.cuh", "pdl.cuh", "sm90_config.h")
# Longest compile first (the sources are handed to the compilers in this order): the CUTLASS 3 files take 50-100 s
# each on one core, api.cu and dw_mma.cu a few seconds.
PATH_SOURCES = {
    "sm90": ("sm90_fwd_wide.cu", "sm90_dact.cu", "sm90_fwd.cu", "sm90_dw.cu", "dw_mma.cu", "api.cu"),
    "portable": ("portable_gemms.cu", "dw_mma.cu", "api.cu"),
}
PATH_HEADERS = {"sm90": ("sm90_common.cuh", "sm90_fwd.cuh", "tma_guard.cuh"), "portable": ("portable_config.h",)}
BASE_FLAGS = ("-std=c++17", "-O3", "-DNDEBUG", "--expt-relaxed-constexpr", "-Xcompiler", "-fPIC",
              "-Xcompiler", "-fvisibility=hidden")


@dataclass(frozen=True)
class Target:
    path: str  # "sm90" or "portable"
    arch: str  # e.g. "sm_90a"
    cc: int  # compute capability as 10*major + minor the library requires (exactly)
    defines: tuple[str, ...] = ()  # experiment variants only, e.g. ("ADALN_FWD_LARGE_TN=256",); empty = shipped recipe


def recipe(target: Target) -> Recipe:
    """What the toolchain builds for this target: the path's sources, and the path and capability as defines."""
    return Recipe(name=f"bundled-{target.path}", lib_name=LIB_NAME, abi=ABI_VERSION, arch=target.arch, folder=HERE,
                  sources=PATH_SOURCES[target.path], headers=(*COMMON_HEADERS, *PATH_HEADERS[target.path]),
                  flags=BASE_FLAGS, defines=(f"ADALN_PATH_{target.path.upper()}", f"ADALN_REQUIRED_CC={target.cc}",
                                             "ADALN_EXACT_CC=1", *target.defines),
                  header_sets=(CUTLASS,), notes=(("path", target.path), ("cc", target.cc)))


def cache_key(target: Target) -> str:
    return _recipe_key(recipe(target))


def target_for_arch(path: str, arch: str, defines: tuple[str, ...] = ()) -> Target:
    """A build target named explicitly (CI, prebuilds): path "sm90"/"portable", arch like "sm_90a"."""
    if path not in PATH_SOURCES:
        raise ValueError(f"unknown code path {path!r} (known: {', '.join(PATH_SOURCES)})")
    cc = parse_arch(arch)
    if path == "sm90" and arch != "sm_90a":
        raise ValueError("the sm90 (wgmma) path builds for sm_90a only")
    return Target(path, arch, cc, tuple(defines))


def target_for_capability(major: int, minor: int, forced_path: Optional[str] = None) -> Target:
    """The library this device needs; raises BuildError for a GPU the kernel does not support."""
    arch = arch_for_capability(major, minor, MIN_CC, "mma.sync bf16")
    forced = forced_path or os.environ.get("ADALN_BENCH_BUNDLED_PATH") or None
    if forced not in (None, "", "auto", "sm90", "portable"):
        raise BuildError(f"ADALN_BENCH_BUNDLED_PATH={forced!r}: expected sm90 or portable")
    cc = parse_arch(arch)
    if cc == 90:
        return Target("portable" if forced == "portable" else "sm90", arch, cc)
    if forced == "sm90":
        raise BuildError(f"the sm90 path needs compute capability 9.0, device has {major}.{minor}")
    return Target("portable", arch, cc)


class Library:
    """ctypes view of one built library."""

    def __init__(self, lib_path: Path, target: Target, meta: dict):
        self.path = lib_path
        self.target = target
        self.meta = meta
        self._lib = ctypes.CDLL(str(lib_path))
        L = self._lib
        i64, vp, sz = ctypes.c_int64, ctypes.c_void_p, ctypes.c_size_t
        L.adaln_abi_version.restype = ctypes.c_int
        L.adaln_path.restype = ctypes.c_char_p
        L.adaln_config.restype = ctypes.c_char_p
        L.adaln_required_cc.restype = ctypes.c_int
        L.adaln_chunking.argtypes = [i64, *[ctypes.POINTER(i64)] * 4]
        L.adaln_chunking.restype = None
        L.adaln_gemm_workspace_bytes.restype = sz
        L.adaln_dtemb_scratch_bytes.argtypes = [i64, i64, i64]
        L.adaln_dtemb_scratch_bytes.restype = sz
        dev = ctypes.c_int
        L.adaln_forward.argtypes = [vp, vp, vp, vp, vp, i64, i64, i64, vp, sz, dev, vp, ctypes.c_char_p, ctypes.c_int]
        L.adaln_forward.restype = ctypes.c_int
        L.adaln_backward.argtypes = [vp, vp, vp, vp, vp, vp, vp, i64, i64, i64, vp, sz, dev, vp, ctypes.c_char_p,
                                     ctypes.c_int]
        L.adaln_backward.restype = ctypes.c_int
        L.adaln_status_name.argtypes = [ctypes.c_int]
        L.adaln_status_name.restype = ctypes.c_char_p
        self.abi = L.adaln_abi_version()
        if self.abi not in READABLE_ABI_VERSIONS:
            raise BuildError(f"{lib_path}: ABI version {self.abi}, expected {ABI_VERSION}")
        if self.abi == 2:  # no chunk groups: (kchunk, nchunks, t_block)
            L.adaln_chunking.argtypes = [i64, *[ctypes.POINTER(i64)] * 3]
        if L.adaln_required_cc() != target.cc:
            raise BuildError(f"{lib_path}: built for cc {L.adaln_required_cc()}, expected {target.cc}")
        self.path_name = L.adaln_path().decode()
        self.config = L.adaln_config().decode()
        self.gemm_ws_bytes = int(L.adaln_gemm_workspace_bytes())

    def chunking(self, n: int) -> tuple[int, int, int, int]:
        """(chunk length, chunks, chunks per group, T block) of the d_temb reduction for N = n (api.cu)."""
        k, c, g, t = (ctypes.c_int64() for _ in range(4))
        if self.abi == 2:  # each chunk its own group: the same fold order
            self._lib.adaln_chunking(n, ctypes.byref(k), ctypes.byref(c), ctypes.byref(t))
            return k.value, c.value, 1, t.value
        self._lib.adaln_chunking(n, ctypes.byref(k), ctypes.byref(c), ctypes.byref(g), ctypes.byref(t))
        return k.value, c.value, g.value, t.value

    def dtemb_scratch_bytes(self, t: int, d: int, n: int) -> int:
        return int(self._lib.adaln_dtemb_scratch_bytes(t, d, n))

    def status_name(self, rc: int) -> str:
        return self._lib.adaln_status_name(rc).decode()

    def _check(self, rc: int, buf, what: str) -> None:
        """A failed call launched nothing (see api.cu), so it is an ordinary exception, never a sticky CUDA error."""
        if rc != 0:
            msg = buf.value.decode(errors="replace") or "no message"
            raise RuntimeError(f"bundled kernel {what} failed ({self.status_name(rc)}, status {rc}): {msg}")

    def forward(self, temb, w, b, act, y, t, d, n, ws, ws_bytes, device, stream) -> None:
        buf = ctypes.create_string_buffer(1024)
        rc = self._lib.adaln_forward(temb, w, b, act, y, t, d, n, ws, ws_bytes, device, stream, buf, 1024)
        self._check(rc, buf, "forward")

    def backward(self, dy, w, temb, act, dtemb, dw, db, t, d, n, scratch, scratch_bytes, device, stream) -> None:
        buf = ctypes.create_string_buffer(1024)
        rc = self._lib.adaln_backward(dy, w, temb, act, dtemb, dw, db, t, d, n, scratch, scratch_bytes, device, stream,
                                      buf, 1024)
        self._check(rc, buf, "backward")


def load(target: Target, log=None) -> Library:
    return load_once(recipe(target), lambda path, meta: Library(path, target, meta), log=log)


def _path_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--path", choices=("auto", "sm90", "portable"), default="auto",
                        help="auto: sm90 for sm_90a, portable otherwise")


def _recipe_for(arch: str, args: argparse.Namespace) -> Recipe:
    path = args.path if args.path != "auto" else ("sm90" if arch == "sm_90a" else "portable")
    return recipe(target_for_arch(path, arch))


if __name__ == "__main__":
    sys.exit(prebuild_main("the bundled projection kernel library", _recipe_for, add_options=_path_option))
