"""Build, cache and load the timestep-MLP kernel library (no torch needed here).

Four sources (the C interface and elementwise kernels in ``mlp.cu``; the CUTLASS 3xTF32 GEMMs in ``gemm_tn.cu``,
``gemm_nn.cu`` and ``gemm_dw.cu``, compiled in parallel), one shared library per target architecture, loaded with
ctypes through a plain C interface (no torch C++ ABI). nvcc and the CUTLASS headers are found as for the bundled
projection kernel (``adaln_bench.kernels.bundled.build``: ``find_nvcc``, ``find_cutlass_include``), and the
library is cached beside it: ``$ADALN_BENCH_KERNEL_CACHE`` or ``~/.cache/adaln_bench/kernels``, folder
``timestep_mlp-<arch>-<key>`` (key = hash of the sources, flags and target). A library already there is loaded
without nvcc or CUTLASS (prebuilt and carried). Prebuild with
``python -m adaln_bench.kernels.timestep_mlp.build --arch sm_90a --arch sm_100a``.

Target: compute capability 9.0 -> sm_90a, 10.x -> sm_10xa, other >= 8.0 -> that exact architecture. Every target
runs the same code (CUTLASS 2.x, mma.sync m16n8k8 TF32, the Ampere instruction set); the library refuses a device
of another capability (status wrong_arch).
"""
from __future__ import annotations

import argparse
import ctypes
import hashlib
import json
import os
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from adaln_bench.kernels.bundled.build import (BuildError, cache_root, find_cutlass_include, find_nvcc,
                                               missing_toolchain, nvcc_version)
from adaln_bench.kernels.library_cache import build_atomically, cached_meta

HERE = Path(__file__).resolve().parent
SOURCES = (  # longest compile first
    "gemm_nn.cu",
    "gemm_tn.cu",
    "gemm_dw.cu",
    "row_stream.cu",
    "mlp.cu",
)
HEADERS = ("gemm_3xtf32.cuh", "gemm_impl.cuh")
LIB_NAME = "libadaln_timestep_mlp.so"
ABI_VERSION = 1
FLAGS = ("-std=c++17", "-O3", "-DNDEBUG", "--expt-relaxed-constexpr", "-Xcompiler", "-fPIC",
         "-Xcompiler", "-fvisibility=hidden")

__all__ = ["BuildError", "Library", "Target", "ensure_library", "load", "missing_toolchain", "target_for_arch",
           "target_for_capability"]


@dataclass(frozen=True)
class Target:
    arch: str  # e.g. "sm_90a"
    cc: int  # 10 * major + minor, exactly what the library runs on
    defines: tuple[str, ...] = ()  # experiment variants only (e.g. "TMLP_SPLIT_Y=8"); empty = the shipped recipe

    @property
    def gencode(self) -> str:
        return f"-gencode=arch=compute_{self.arch[3:]},code={self.arch}"

    def flags(self) -> list[str]:
        return [*FLAGS, self.gencode, f"-DTMLP_REQUIRED_CC={self.cc}", *(f"-D{d}" for d in self.defines)]


def target_for_arch(arch: str) -> Target:
    if not arch.startswith("sm_") or not arch[3:].rstrip("af").isdigit():
        raise ValueError(f"arch must look like sm_90a, got {arch!r}")
    return Target(arch, int(arch[3:].rstrip("af")))


def target_for_capability(major: int, minor: int) -> Target:
    cc = 10 * major + minor
    if cc < 80:
        raise BuildError(f"compute capability {major}.{minor} is not supported (needs 8.0 or later: mma.sync TF32)")
    return Target(f"sm_{cc}a" if cc >= 90 else f"sm_{cc}", cc)


def cache_key(target: Target) -> str:
    h = hashlib.sha256()
    h.update(f"abi={ABI_VERSION}\narch={target.arch}\ncc={target.cc}\nflags={' '.join(target.flags())}\n".encode())
    for name in (*HEADERS, *SOURCES):
        h.update(name.encode() + b"\0" + (HERE / name).read_bytes() + b"\0")
    return h.hexdigest()[:20]


def library_dir(target: Target, root: Optional[Path] = None) -> Path:
    return (root or cache_root()) / f"timestep_mlp-{target.arch}-{cache_key(target)}"


def _run(cmd: list[str], what: str) -> float:
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise BuildError(f"{what} failed (exit {proc.returncode}): {' '.join(cmd)}\n{(proc.stdout + proc.stderr)[-6000:]}")
    return time.perf_counter() - t0


def compile_library(target: Target, out_dir: Path, jobs: Optional[int] = None) -> dict:
    """Each source compiled (in parallel), then linked into out_dir/LIB_NAME. Returns metadata (also meta.json)."""
    nvcc, inc = find_nvcc(), find_cutlass_include()
    if nvcc is None or inc is None:
        raise BuildError(missing_toolchain() or "nvcc or the CUTLASS headers not found")
    out_dir.mkdir(parents=True, exist_ok=True)
    flags = [*target.flags(), f"-I{HERE}", f"-I{inc}"]
    t0 = time.perf_counter()

    def one(src: str) -> tuple[str, float]:
        obj = out_dir / (Path(src).stem + ".o")
        return src, _run([nvcc, *flags, "-c", str(HERE / src), "-o", str(obj)], f"nvcc {src} for {target.arch}")

    with ThreadPoolExecutor(max_workers=jobs or max(1, min(len(SOURCES), os.cpu_count() or 1))) as pool:
        times = dict(pool.map(one, SOURCES))
    objs = [str(out_dir / (Path(s).stem + ".o")) for s in SOURCES]
    _run([nvcc, "-shared", target.gencode, "-o", str(out_dir / LIB_NAME), *objs], f"link {LIB_NAME}")
    for o in objs:
        os.unlink(o)
    meta = {"abi": ABI_VERSION, "arch": target.arch, "cc": target.cc, "key": cache_key(target),
            "flags": " ".join(target.flags()), "nvcc": nvcc_version(nvcc), "cutlass_include": str(inc),
            "compile_seconds": {k: round(v, 1) for k, v in times.items()},
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
        buf = _error_buffer()
        buf[0] = b"\0"
        rc = getattr(self._lib, name)(*args, buf, 1024)
        if rc != 0:
            msg = buf.value.decode(errors="replace") or "no message"
            raise RuntimeError(f"timestep_mlp kernel {name} failed ({self.status_name(rc)}, status {rc}): {msg}")


_ERRORS = threading.local()  # one message buffer a thread (autograd's device thread calls the backward)


def _error_buffer():
    buf = getattr(_ERRORS, "buf", None)
    if buf is None:
        buf = _ERRORS.buf = ctypes.create_string_buffer(1024)
    return buf


_LOADED: dict[Target, Library] = {}
_LOCK = threading.Lock()


def load(target: Target) -> Library:
    with _LOCK:
        if target not in _LOADED:
            lib_path, meta = ensure_library(target)
            _LOADED[target] = Library(lib_path, target, meta)
        return _LOADED[target]


def main(argv: Optional[list[str]] = None) -> int:
    p = argparse.ArgumentParser(description="Prebuild the timestep-MLP kernel library into the cache.")
    p.add_argument("--arch", action="append", default=None, help="sm_90a (default), sm_100a, ... (repeatable)")
    p.add_argument("--define", action="append", default=[], help="an experiment variant, e.g. TMLP_SPLIT_Y=8")
    args = p.parse_args(argv)
    for arch in args.arch or ["sm_90a"]:
        try:
            target = Target(target_for_arch(arch).arch, target_for_arch(arch).cc, tuple(args.define))
            lib, meta = ensure_library(target)
        except (ValueError, BuildError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        print(f"{arch}: {lib} ({'cached' if meta.get('prebuilt_or_cached') else 'built'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
