"""Build, cache and load the draw kernel (philox_draw.cu) as a small shared library with a plain C ABI (ctypes).

nvcc: $ADALN_BENCH_NVCC, $CUDA_HOME/bin, PATH, /usr/local/cuda/bin. curand's device headers (curand_kernel.h and
its companions): $ADALN_BENCH_CURAND_INCLUDE, the toolkit's include folder beside nvcc, $CUDA_HOME/include,
/usr/local/cuda/include, then the `nvidia-curand` wheel's (nvidia/cu13/include or nvidia/curand/include; PyTorch's
CUDA wheels depend on it). Only the curand*.h files are copied into the build (a wheel's include folder may hold
other CUDA headers of another version, which must not shadow nvcc's own).

Cache: ``$ADALN_BENCH_KERNEL_CACHE`` or ``~/.cache/adaln_bench/kernels``, one folder ``draws-<arch>-<key>`` (key:
hash of the source, the curand headers, the flags and the target). A library already there loads without nvcc.
Prebuild with ``python -m adaln_bench.draws.build --arch sm_90a``. No torch needed here.
"""
from __future__ import annotations

import argparse
import ctypes
import hashlib
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Optional

from adaln_bench.kernels.library_cache import build_atomically

HERE = Path(__file__).resolve().parent
SOURCE = HERE / "philox_draw.cu"
LIB_NAME = "libadaln_draws.so"
ABI_VERSION = 1
# No --use_fast_math, IEEE sqrt and division, denormals kept: what PyTorch's own build of these kernels uses.
FLAGS = ("-std=c++17", "-O3", "-Xcompiler", "-fPIC", "-Xcompiler", "-fvisibility=hidden")


class BuildError(RuntimeError):
    """The draw library could not be built or loaded."""


def arch_for_capability(major: int, minor: int) -> str:
    """The target a device needs: architecture-specific ('a') code from Hopper on (sm_90a, sm_100a, ...)."""
    cc = 10 * major + minor
    return f"sm_{cc}a" if cc >= 90 else f"sm_{cc}"


def _check_arch(arch: str) -> str:
    digits = arch[3:].rstrip("af") if arch.startswith("sm_") else ""
    if not digits.isdigit():
        raise ValueError(f"arch must look like sm_90a, got {arch!r}")
    return arch


def extra_flags() -> tuple[str, ...]:
    """$ADALN_BENCH_DRAWS_NVCC_FLAGS, split on spaces (an experiment only; part of the cache key)."""
    return tuple(os.environ.get("ADALN_BENCH_DRAWS_NVCC_FLAGS", "").split())


def gencode(arch: str) -> str:
    return f"-gencode=arch=compute_{arch[3:]},code={arch}"


def find_nvcc() -> Optional[str]:
    if os.environ.get("ADALN_BENCH_NVCC"):
        return os.environ["ADALN_BENCH_NVCC"]
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    if home and (Path(home) / "bin" / "nvcc").exists():
        return str(Path(home) / "bin" / "nvcc")
    found = shutil.which("nvcc")
    if found:
        return found
    return "/usr/local/cuda/bin/nvcc" if Path("/usr/local/cuda/bin/nvcc").exists() else None


def _has_curand(d: Path) -> bool:
    return (d / "curand_kernel.h").is_file() and (d / "curand_philox4x32_x.h").is_file()


def find_curand_include(nvcc: Optional[str] = None) -> Optional[Path]:
    """The folder holding curand_kernel.h (see the module docstring for the order), or None."""
    candidates: list[Path] = []
    if os.environ.get("ADALN_BENCH_CURAND_INCLUDE"):
        candidates.append(Path(os.environ["ADALN_BENCH_CURAND_INCLUDE"]))
    nvcc = nvcc or find_nvcc()
    if nvcc:
        candidates.append(Path(os.path.realpath(nvcc)).parent.parent / "include")
    for env in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(env):
            candidates.append(Path(os.environ[env]) / "include")
    candidates.append(Path("/usr/local/cuda/include"))
    try:
        spec = importlib.util.find_spec("nvidia")
    except (ImportError, ValueError):
        spec = None
    if spec is not None and spec.submodule_search_locations:
        for loc in spec.submodule_search_locations:
            for sub in ("cu13", "curand", "cu12"):
                candidates.append(Path(loc) / sub / "include")
    for c in candidates:
        if _has_curand(c):
            return c
    return None


def missing_toolchain() -> Optional[str]:
    """None when nvcc and curand's headers are both there, else what is missing."""
    nvcc = find_nvcc()
    if nvcc is None:
        return "nvcc not found (set CUDA_HOME or ADALN_BENCH_NVCC, or put nvcc on PATH)"
    if find_curand_include(nvcc) is None:
        return ("curand's device headers (curand_kernel.h) not found: install the CUDA toolkit's curand or "
                "`pip install nvidia-curand`, or set ADALN_BENCH_CURAND_INCLUDE")
    return None


def _curand_headers(inc: Path) -> list[Path]:
    return sorted(p for p in inc.glob("curand*.h") if p.is_file())


def cache_root() -> Path:
    env = os.environ.get("ADALN_BENCH_KERNEL_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "adaln_bench" / "kernels"


def flags_for(arch: str) -> list[str]:
    return [*FLAGS, gencode(_check_arch(arch)), *extra_flags()]


def cache_key(arch: str, curand_include: Optional[Path] = None) -> str:
    h = hashlib.sha256()
    h.update(f"abi={ABI_VERSION}\narch={arch}\nflags={' '.join(flags_for(arch))}\n".encode())
    h.update(SOURCE.read_bytes())
    inc = curand_include if curand_include is not None else find_curand_include()
    for p in _curand_headers(inc) if inc else []:
        h.update(p.name.encode() + b"\0" + p.read_bytes())
    return h.hexdigest()[:20]


def compile_library(arch: str, out_dir: Path) -> Path:
    """Compile philox_draw.cu for arch into out_dir/libadaln_draws.so; returns the library's path."""
    nvcc = find_nvcc()
    inc = find_curand_include(nvcc) if nvcc else None
    if nvcc is None or inc is None:
        raise BuildError(missing_toolchain() or "toolchain missing")
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="adaln-draws-inc-") as tmp:
        for p in _curand_headers(inc):  # curand's headers only, so nothing shadows nvcc's own CUDA headers
            shutil.copy2(p, Path(tmp) / p.name)
        lib = out_dir / LIB_NAME
        cmd = [nvcc, *flags_for(arch), f"-I{tmp}", "-shared", str(SOURCE), "-o", str(lib)]
        proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise BuildError(f"nvcc for {arch} failed (exit {proc.returncode}): {' '.join(cmd)}\n"
                         f"{(proc.stdout + proc.stderr)[-4000:]}")
    (out_dir / "source.txt").write_text(f"nvcc: {nvcc}\ncurand include: {inc}\nflags: {' '.join(cmd[1:])}\n")
    return lib


def ensure_library(arch: str) -> Path:
    """The cached library for arch, built (atomically: a temporary folder renamed into place) when missing."""
    inc = find_curand_include()
    final = cache_root() / f"draws-{arch}-{cache_key(arch, inc)}"
    if not (final / LIB_NAME).exists():
        build_atomically(final, LIB_NAME, lambda tmp: compile_library(arch, tmp))
    return final / LIB_NAME


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


_LOADED: dict[str, Library] = {}


def load(arch: str) -> Library:
    if arch not in _LOADED:
        _LOADED[arch] = Library(ensure_library(arch))
    return _LOADED[arch]


def main(argv: Optional[list[str]] = None) -> int:
    p = argparse.ArgumentParser(description="Prebuild the seeded-draw kernel library into the cache (or --out).")
    p.add_argument("--arch", action="append", default=None, help="sm_90a (default), sm_100a, ... (repeatable)")
    p.add_argument("--out", type=Path, default=None, help="write the library under this folder instead")
    args = p.parse_args(argv)
    for arch in args.arch or ["sm_90a"]:
        if args.out is not None:
            lib = compile_library(arch, args.out / f"draws-{arch}-{cache_key(arch)}")
        else:
            lib = ensure_library(arch)
        print(f"{arch}: {lib}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
