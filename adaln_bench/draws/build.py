"""The draw kernel (philox_draw.cu) as a small shared library with a plain C ABI (ctypes): its recipe per target
and its interface. No torch needed here.

Built and cached by the kernel toolchain (adaln_bench/kernels/toolchain; cache folder ``draws-<arch>-<key>``),
with curand's device headers (curand_kernel.h and its companions) found as headers.find_curand_include says and
copied into the build alone. Prebuild with ``python -m adaln_bench.draws.build --arch sm_90a``.
"""
from __future__ import annotations

import ctypes
import os
import sys
from pathlib import Path

from adaln_bench.kernels.toolchain import CURAND, BuildError, Recipe, arch_for_capability, load_once, prebuild_main

__all__ = ["BuildError", "Library", "arch_for_capability", "extra_flags", "load", "recipe"]

HERE = Path(__file__).resolve().parent
SOURCES = ("philox_draw.cu",)
LIB_NAME = "libadaln_draws.so"
ABI_VERSION = 1
# No --use_fast_math, IEEE sqrt and division, denormals kept: what PyTorch's own build of these kernels uses.
FLAGS = ("-std=c++17", "-O3", "-Xcompiler", "-fPIC", "-Xcompiler", "-fvisibility=hidden")


def extra_flags() -> tuple[str, ...]:
    """$ADALN_BENCH_DRAWS_NVCC_FLAGS, split on spaces (an experiment only; part of the cache key)."""
    return tuple(os.environ.get("ADALN_BENCH_DRAWS_NVCC_FLAGS", "").split())


def recipe(arch: str) -> Recipe:
    """The draw library for an nvcc target such as "sm_90a" (any capability: the kernel needs nothing special)."""
    return Recipe(name="draws", lib_name=LIB_NAME, abi=ABI_VERSION, arch=arch, folder=HERE, sources=SOURCES,
                  flags=FLAGS, extra_flags=extra_flags(), header_sets=(CURAND,))


class Library:
    """ctypes view of one built draw library."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self._lib = ctypes.CDLL(str(path))
        L = self._lib
        L.adaln_draws_abi_version.restype = ctypes.c_int
        L.adaln_draws_threads_per_block.restype = ctypes.c_int
        L.adaln_draws_fill.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_int64, ctypes.c_ulonglong,
                                       ctypes.c_ulonglong, ctypes.c_int64, ctypes.c_float, ctypes.c_float,
                                       ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int]
        L.adaln_draws_fill.restype = ctypes.c_int
        if L.adaln_draws_abi_version() != ABI_VERSION:
            raise BuildError(f"{path}: ABI version {L.adaln_draws_abi_version()}, expected {ABI_VERSION}")
        self.threads_per_block = int(L.adaln_draws_threads_per_block())

    def fill(self, kind: int, out_ptr: int, numel: int, seed: int, offset: int, blocks: int, a: float, b: float,
             device: int, stream: int) -> None:
        """Enqueue one launch on `stream` (a cudaStream_t as an int); raises RuntimeError when it fails."""
        buf = ctypes.create_string_buffer(512)
        rc = self._lib.adaln_draws_fill(kind, out_ptr, numel, seed, offset, blocks, a, b, device, stream, buf, 512)
        if rc != 0:
            raise RuntimeError(f"draw kernel failed (code {rc}): {buf.value.decode(errors='replace')}")


def load(arch: str) -> Library:
    return load_once(recipe(arch), lambda path, meta: Library(path))


if __name__ == "__main__":
    sys.exit(prebuild_main("the seeded-draw kernel library", lambda arch, _: recipe(arch)))
