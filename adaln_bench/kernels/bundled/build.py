"""Build, cache and load the bundled CUDA kernel library (no torch needed here).

One shared library per code path and target architecture, compiled with the nvcc found on the machine
from the sources beside this file and CUTLASS/CuTe headers (PyPI `nvidia-cutlass`), and loaded with
ctypes. It exports a plain C interface (see api.cu), so it does not depend on torch's C++ ABI and can be
compiled on a machine without a GPU and carried to one.

Cache: ``$ADALN_BENCH_KERNEL_CACHE`` or ``~/.cache/adaln_bench/kernels``; one folder per library,
``<path>-<arch>-<key>``, key = hash of the sources, flags and target. A library already there is loaded
without nvcc or CUTLASS (prebuilt and carried). Prebuild with
``python -m adaln_bench.kernels.bundled.build --arch sm_90a``.

The code path is chosen by the device's architecture only (never by the batch):
compute capability 9.0 -> "sm90" (wgmma, sm_90a); 10.x -> "portable" (mma.sync) built for sm_100a/sm_10xa;
other capabilities >= 8.0 -> "portable" for that exact architecture. ``ADALN_BENCH_BUNDLED_PATH=portable``
forces the portable path (to test it on Hopper).
"""
from __future__ import annotations

import argparse
import ctypes
import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from adaln_bench.kernels.library_cache import build_atomically, cached_meta

HERE = Path(__file__).resolve().parent
ABI_VERSION = 3  # 2: entry points take the device index; adaln_status_name. 3: chunk groups in adaln_chunking
# A library of the previous ABI still loads (kernel-bench compares against another commit's build).
READABLE_ABI_VERSIONS = (2, ABI_VERSION)
LIB_NAME = "libadaln_bundled.so"

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


class BuildError(RuntimeError):
    """The library could not be built or loaded."""


@dataclass(frozen=True)
class Target:
    path: str  # "sm90" or "portable"
    arch: str  # e.g. "sm_90a"
    cc: int  # compute capability as 10*major + minor the library requires (exactly)
    defines: tuple[str, ...] = ()  # experiment variants only, e.g. ("ADALN_FWD_LARGE_TN=256",); empty = shipped recipe

    @property
    def gencode(self) -> str:
        return f"-gencode=arch=compute_{self.arch[3:]},code={self.arch}"

    def flags(self) -> list[str]:
        return [*BASE_FLAGS, self.gencode, f"-DADALN_PATH_{self.path.upper()}", f"-DADALN_REQUIRED_CC={self.cc}",
                "-DADALN_EXACT_CC=1", *(f"-D{d}" for d in self.defines)]


def target_for_arch(path: str, arch: str, defines: tuple[str, ...] = ()) -> Target:
    """A build target named explicitly (CI, prebuilds): path "sm90"/"portable", arch like "sm_90a"."""
    if path not in PATH_SOURCES:
        raise ValueError(f"unknown code path {path!r} (known: {', '.join(PATH_SOURCES)})")
    if not arch.startswith("sm_"):
        raise ValueError(f"arch must look like sm_90a, got {arch!r}")
    digits = arch[3:].rstrip("af")
    if not digits.isdigit():
        raise ValueError(f"arch must look like sm_90a, got {arch!r}")
    if path == "sm90" and arch != "sm_90a":
        raise ValueError("the sm90 (wgmma) path builds for sm_90a only")
    return Target(path, arch, int(digits), tuple(defines))


def target_for_capability(major: int, minor: int, forced_path: Optional[str] = None) -> Target:
    """The library this device needs; raises BuildError for a GPU the kernel does not support."""
    cc = 10 * major + minor
    if cc < 80:
        raise BuildError(f"compute capability {major}.{minor} is not supported (needs 8.0 or later: mma.sync bf16)")
    forced = forced_path or os.environ.get("ADALN_BENCH_BUNDLED_PATH") or None
    if forced not in (None, "", "auto", "sm90", "portable"):
        raise BuildError(f"ADALN_BENCH_BUNDLED_PATH={forced!r}: expected sm90 or portable")
    if cc == 90:
        path = "portable" if forced == "portable" else "sm90"
        return Target(path, "sm_90a", 90)
    if forced == "sm90":
        raise BuildError(f"the sm90 path needs compute capability 9.0, device has {major}.{minor}")
    # Architecture-specific ('a') targets from Hopper on; plain ones before.
    arch = f"sm_{cc}a" if cc >= 90 else f"sm_{cc}"
    return Target("portable", arch, cc)


def cache_root() -> Path:
    env = os.environ.get("ADALN_BENCH_KERNEL_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "adaln_bench" / "kernels"


def source_files(path: str) -> list[Path]:
    names = [*COMMON_HEADERS, *PATH_HEADERS[path], *PATH_SOURCES[path]]
    return [HERE / n for n in names]


def cache_key(target: Target) -> str:
    h = hashlib.sha256()
    h.update(f"abi={ABI_VERSION}\npath={target.path}\narch={target.arch}\ncc={target.cc}\n".encode())
    h.update(("flags=" + " ".join(target.flags()) + "\n").encode())
    for f in source_files(target.path):
        h.update(f.name.encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()[:20]


def library_dir(target: Target, root: Optional[Path] = None) -> Path:
    return (root or cache_root()) / f"{target.path}-{target.arch}-{cache_key(target)}"


def find_nvcc() -> Optional[str]:
    for env in ("ADALN_BENCH_NVCC",):
        if os.environ.get(env):
            return os.environ[env]
    for home in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH")):
        if home and (Path(home) / "bin" / "nvcc").exists():
            return str(Path(home) / "bin" / "nvcc")
    found = shutil.which("nvcc")
    if found:
        return found
    if Path("/usr/local/cuda/bin/nvcc").exists():
        return "/usr/local/cuda/bin/nvcc"
    return None


def find_cutlass_include() -> Optional[Path]:
    """CUTLASS/CuTe headers: $ADALN_BENCH_CUTLASS_INCLUDE, else the `nvidia-cutlass` wheel's copy."""
    env = os.environ.get("ADALN_BENCH_CUTLASS_INCLUDE")
    candidates = [Path(env)] if env else []
    try:
        spec = importlib.util.find_spec("cutlass_library")
    except (ImportError, ValueError):
        spec = None
    if spec is not None and spec.submodule_search_locations:
        for loc in spec.submodule_search_locations:
            candidates.append(Path(loc) / "source" / "include")
    for c in candidates:
        if (c / "cute" / "tensor.hpp").exists() and (c / "cutlass" / "cutlass.h").exists():
            return c
    return None


def nvcc_version(nvcc: str) -> str:
    try:
        out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=60).stdout
    except Exception as exc:  # noqa: BLE001 - only recorded
        return f"unknown ({exc})"
    lines = [ln for ln in out.splitlines() if "release" in ln]
    return lines[-1].strip() if lines else out.strip()[-80:]


def missing_toolchain() -> Optional[str]:
    """None when nvcc and the CUTLASS headers are both there, else what is missing."""
    if find_nvcc() is None:
        return "nvcc not found (set CUDA_HOME or ADALN_BENCH_NVCC, or put nvcc on PATH)"
    if find_cutlass_include() is None:
        return ("CUTLASS headers not found (pip install 'nvidia-cutlass==4.2.0.0', i.e. the 'kernel' extra, "
                "or set ADALN_BENCH_CUTLASS_INCLUDE)")
    return None


def _run(cmd: list[str], what: str) -> float:
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = (proc.stdout + proc.stderr)[-6000:]
        raise BuildError(f"{what} failed (exit {proc.returncode}): {' '.join(cmd)}\n{tail}")
    return time.perf_counter() - t0


def compile_library(target: Target, out_dir: Path, jobs: Optional[int] = None, log=None) -> dict:
    """Compile every source of the target's path and link the shared library into out_dir. Returns metadata."""
    nvcc = find_nvcc()
    if nvcc is None:
        raise BuildError(missing_toolchain() or "nvcc not found")
    inc = find_cutlass_include()
    if inc is None:
        raise BuildError(missing_toolchain() or "CUTLASS headers not found")
    out_dir.mkdir(parents=True, exist_ok=True)
    flags = target.flags() + [f"-I{HERE}", f"-I{inc}"]
    sources = PATH_SOURCES[target.path]
    jobs = jobs or max(1, min(len(sources), os.cpu_count() or 1))
    t0 = time.perf_counter()

    def one(src: str) -> tuple[str, float]:
        obj = out_dir / (Path(src).stem + ".o")
        secs = _run([nvcc, *flags, "-c", str(HERE / src), "-o", str(obj)], f"nvcc {src} for {target.arch}")
        if log:
            log(f"  compiled {src} for {target.arch} in {secs:.1f} s")
        return src, secs

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        times = dict(pool.map(one, sources))
    objs = [str(out_dir / (Path(s).stem + ".o")) for s in sources]
    lib = out_dir / LIB_NAME
    _run([nvcc, "-shared", target.gencode, "-o", str(lib), *objs], f"link {LIB_NAME} for {target.arch}")
    for o in objs:
        os.unlink(o)
    meta = {
        "abi": ABI_VERSION,
        "path": target.path,
        "arch": target.arch,
        "cc": target.cc,
        "key": cache_key(target),
        "flags": " ".join(target.flags()),
        "nvcc": nvcc_version(nvcc),
        "cutlass_include": str(inc),
        "cutlass_version": _cutlass_version(),
        "compile_seconds": {k: round(v, 1) for k, v in times.items()},
        "build_seconds": round(time.perf_counter() - t0, 1),
    }
    (out_dir / "meta.json").write_text(json.dumps(meta, indent=2))
    return meta


def _cutlass_version() -> str:
    try:
        from importlib.metadata import version

        return version("nvidia-cutlass")
    except Exception:  # noqa: BLE001
        return "unknown"


def ensure_library(target: Target, log=None) -> tuple[Path, dict]:
    """The cached library for target, building it (atomically) when it is not there yet."""
    final = library_dir(target)
    meta = cached_meta(final, LIB_NAME)
    if meta is not None:
        return final / LIB_NAME, meta
    missing = missing_toolchain()
    if missing:
        raise BuildError(f"no cached library at {final} and cannot build one: {missing}")
    meta = build_atomically(final, LIB_NAME, lambda tmp: compile_library(target, tmp, log=log))
    meta["prebuilt_or_cached"] = False
    return final / LIB_NAME, meta


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


_LOADED: dict[Target, Library] = {}


def load(target: Target, log=None) -> Library:
    if target not in _LOADED:
        lib_path, meta = ensure_library(target, log=log)
        _LOADED[target] = Library(lib_path, target, meta)
    return _LOADED[target]


def main(argv: Optional[list[str]] = None) -> int:
    p = argparse.ArgumentParser(description="Prebuild the bundled AdaLN kernel library into the cache (or --out).")
    p.add_argument("--arch", action="append", default=None, help="sm_90a (default), sm_100a, ... (repeatable)")
    p.add_argument("--path", choices=("auto", "sm90", "portable"), default="auto",
                   help="auto: sm90 for sm_90a, portable otherwise")
    p.add_argument("--out", type=Path, default=None, help="write the library here instead of the cache")
    p.add_argument("--define", action="append", default=[], help="experiment variant, e.g. ADALN_FWD_LARGE_TN=256")
    args = p.parse_args(argv)
    for arch in args.arch or ["sm_90a"]:
        path = args.path if args.path != "auto" else ("sm90" if arch == "sm_90a" else "portable")
        target = target_for_arch(path, arch, tuple(args.define))
        if args.out is not None:
            meta = compile_library(target, args.out / library_dir(target).name, log=print)
            print(json.dumps(meta, indent=2))
        else:
            lib, meta = ensure_library(target, log=print)
            print(f"{target.path} {target.arch} {' '.join(target.defines)}: {lib} "
                  f"({'cached' if meta.get('prebuilt_or_cached') else 'built'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
