"""Build, cache and load the gathered-operator kernel library (no torch needed here).

One source (``gathered.cu``), one nvcc call, one shared library per target architecture, loaded with ctypes
through a plain C interface (no torch C++ ABI). It needs no CUTLASS. nvcc is found as for the bundled
projection kernel (``adaln_bench.kernels.bundled.build.find_nvcc``: ``$ADALN_BENCH_NVCC``, ``$CUDA_HOME``,
``PATH``, ``/usr/local/cuda``), and the library is cached beside it: ``$ADALN_BENCH_KERNEL_CACHE`` or
``~/.cache/adaln_bench/kernels``, folder ``gathered-<arch>-<key>`` (key = hash of the source, flags and
target). A library already there is loaded without nvcc (prebuilt and carried). Prebuild with
``python -m adaln_bench.kernels.gathered.build --arch sm_90a --arch sm_100a``.

Target: compute capability 9.0 -> sm_90a, 10.x -> sm_10xa, other >= 8.0 -> that exact architecture
(``sm_XY``, or ``sm_XYa`` from 9.0 on). The kernels use nothing architecture-specific; the library refuses a
device of another capability (status wrong_arch).
"""
from __future__ import annotations

import argparse
import ctypes
import hashlib
import json
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from adaln_bench.kernels.bundled.build import BuildError, cache_root, find_nvcc, nvcc_version
from adaln_bench.kernels.library_cache import build_atomically, cached_meta

HERE = Path(__file__).resolve().parent
SOURCE = "gathered.cu"
HEADERS = ("norm_onepass.cuh",)  # included by SOURCE; part of the cache key
LIB_NAME = "libadaln_gathered.so"
ABI_VERSION = 4
FLAGS = ("-std=c++17", "-O3", "-DNDEBUG", "-Xcompiler", "-fPIC", "-Xcompiler", "-fvisibility=hidden", "-shared")

# op codes of gat_workspace_bytes / gat_chunking
OP_ROW_GATHER, OP_NORM, OP_GATE = 0, 1, 2


@dataclass(frozen=True)
class Target:
    arch: str  # e.g. "sm_90a"
    cc: int  # 10 * major + minor, exactly what the library runs on

    @property
    def gencode(self) -> str:
        return f"-gencode=arch=compute_{self.arch[3:]},code={self.arch}"

    def flags(self) -> list[str]:
        return [*FLAGS, self.gencode, f"-DGAT_REQUIRED_CC={self.cc}"]


def target_for_arch(arch: str) -> Target:
    if not arch.startswith("sm_") or not arch[3:].rstrip("af").isdigit():
        raise ValueError(f"arch must look like sm_90a, got {arch!r}")
    return Target(arch, int(arch[3:].rstrip("af")))


def target_for_capability(major: int, minor: int) -> Target:
    cc = 10 * major + minor
    if cc < 80:
        raise BuildError(f"compute capability {major}.{minor} is not supported (needs 8.0 or later)")
    return Target(f"sm_{cc}a" if cc >= 90 else f"sm_{cc}", cc)


def cache_key(target: Target) -> str:
    h = hashlib.sha256()
    h.update(f"abi={ABI_VERSION}\narch={target.arch}\ncc={target.cc}\nflags={' '.join(target.flags())}\n".encode())
    for name in (SOURCE, *HEADERS):
        h.update((HERE / name).read_bytes())
    return h.hexdigest()[:20]


def library_dir(target: Target, root: Optional[Path] = None) -> Path:
    return (root or cache_root()) / f"gathered-{target.arch}-{cache_key(target)}"


def missing_toolchain() -> Optional[str]:
    if find_nvcc() is None:
        return "nvcc not found (set CUDA_HOME or ADALN_BENCH_NVCC, or put nvcc on PATH)"
    return None


def compile_library(target: Target, out_dir: Path) -> dict:
    """One nvcc call: gathered.cu -> out_dir/libadaln_gathered.so. Returns metadata (also in meta.json)."""
    nvcc = find_nvcc()
    if nvcc is None:
        raise BuildError(missing_toolchain() or "nvcc not found")
    out_dir.mkdir(parents=True, exist_ok=True)
    cmd = [nvcc, *target.flags(), str(HERE / SOURCE), "-o", str(out_dir / LIB_NAME)]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise BuildError(f"nvcc {SOURCE} for {target.arch} failed (exit {proc.returncode}): {' '.join(cmd)}\n"
                         f"{(proc.stdout + proc.stderr)[-6000:]}")
    meta = {"abi": ABI_VERSION, "arch": target.arch, "cc": target.cc, "key": cache_key(target),
            "flags": " ".join(target.flags()), "nvcc": nvcc_version(nvcc),
            "build_seconds": round(time.perf_counter() - t0, 1)}
    (out_dir / "meta.json").write_text(json.dumps(meta, indent=2))
    return meta


def ensure_library(target: Target) -> tuple[Path, dict]:
    """The cached library for target, built (atomically: temp folder, then rename) when missing."""
    final = library_dir(target)
    meta = cached_meta(final, LIB_NAME)
    if meta is not None:
        return final / LIB_NAME, meta
    missing = missing_toolchain()
    if missing:
        raise BuildError(f"no cached library at {final} and cannot build one: {missing}")
    meta = build_atomically(final, LIB_NAME, lambda tmp: compile_library(target, tmp))
    meta["prebuilt_or_cached"] = False
    return final / LIB_NAME, meta


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
        buf = _error_buffer()
        buf[0] = b"\0"  # no stale message from an earlier failure
        rc = getattr(self._lib, name)(*args, buf, 1024)
        if rc != 0:
            msg = buf.value.decode(errors="replace") or "no message"
            raise RuntimeError(f"gathered kernel {name} failed ({self.status_name(rc)}, status {rc}): {msg}")


_ERRORS = threading.local()  # one message buffer a thread (autograd's device thread calls the backward entries)


def _error_buffer():
    buf = getattr(_ERRORS, "buf", None)
    if buf is None:
        buf = _ERRORS.buf = ctypes.create_string_buffer(1024)
    return buf


_LOADED: dict[Target, Library] = {}


def load(target: Target) -> Library:
    if target not in _LOADED:
        lib_path, meta = ensure_library(target)
        _LOADED[target] = Library(lib_path, target, meta)
    return _LOADED[target]


def main(argv: Optional[list[str]] = None) -> int:
    p = argparse.ArgumentParser(description="Prebuild the gathered-operator kernel library into the cache.")
    p.add_argument("--arch", action="append", default=None, help="sm_90a (default), sm_100a, ... (repeatable)")
    args = p.parse_args(argv)
    for arch in args.arch or ["sm_90a"]:
        lib, meta = ensure_library(target_for_arch(arch))
        print(f"{arch}: {lib} ({'cached' if meta.get('prebuilt_or_cached') else 'built'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
