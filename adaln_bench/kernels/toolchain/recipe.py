"""What a kernel library declares for one target, and the cache key that follows from it.

A library module turns its own target (architecture, code path, experiment defines) into a Recipe; everything
else (finding nvcc and headers, the -gencode flag, compiling, the cache) is the toolchain's.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from adaln_bench.kernels.toolchain.arch import gencode
from adaln_bench.kernels.toolchain.headers import HeaderSet


@dataclass(frozen=True)
class Recipe:
    """One kernel library for one target architecture: what nvcc compiles, with which flags, into which file."""

    name: str  # the library's name, the cache folder's first part: "gathered", "bundled-sm90", ...
    lib_name: str  # the shared library's file name
    abi: int  # the version of its C interface
    arch: str  # the nvcc target, e.g. "sm_90a"
    folder: Path  # where its sources are; on the include path
    sources: tuple[str, ...]  # one object each, compiled in parallel and handed out in this order (longest first)
    headers: tuple[str, ...] = ()  # its own headers the sources include
    flags: tuple[str, ...] = ()  # its nvcc flags, before -gencode
    defines: tuple[str, ...] = ()  # NAME or NAME=VALUE, passed as -D after -gencode
    extra_flags: tuple[str, ...] = ()  # an experiment's flags, last
    header_sets: tuple[HeaderSet, ...] = ()  # headers from outside the repository
    notes: tuple[tuple[str, object], ...] = ()  # facts copied into the build record (meta.json)

    def nvcc_flags(self) -> list[str]:
        """Every flag that decides the code (no include paths: they name folders of the machine)."""
        return [*self.flags, gencode(self.arch), *(f"-D{d}" for d in self.defines), *self.extra_flags]


def cache_key(recipe: Recipe) -> str:
    """20 hex digits of a SHA-256 over the library's name, interface version, target, flags and the bytes of
    its own sources and headers: what is in the repository and nothing of the machine, so a library built on
    one machine is found on another, whatever nvcc or CUTLASS is there (meta.json records which built it)."""
    h = hashlib.sha256()
    h.update(f"name={recipe.name}\nabi={recipe.abi}\narch={recipe.arch}\n".encode())
    h.update(("flags=" + " ".join(recipe.nvcc_flags()) + "\n").encode())
    for name in (*recipe.headers, *recipe.sources):
        h.update(name.encode() + b"\0" + (recipe.folder / name).read_bytes() + b"\0")
    return h.hexdigest()[:20]
