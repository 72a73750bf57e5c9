"""Headers from outside the repository that some libraries include: CUTLASS/CuTe, and curand's device headers.

Each set says where it is looked for, what to tell a user who lacks it, and how it reaches nvcc: CUTLASS's
folder is put on the include path; only curand's own files are copied into a folder of their own (a wheel's
include folder may hold other CUDA headers of another version, which must not shadow nvcc's).
"""
from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional


@dataclass(frozen=True)
class HeaderSet:
    name: str  # "cutlass": the build record's keys are <name>_include and <name>_version
    find: Callable[[Optional[str]], Optional[Path]]  # the folder, given the nvcc in use (or None)
    missing: str  # what to do when it is not found
    staged: str = ""  # a file pattern: only these files are included, from a copy of their own
    version: Callable[[], str] = lambda: ""

    def files(self, folder: Path) -> list[Path]:
        """The files copied for a staged set."""
        return sorted(p for p in folder.glob(self.staged) if p.is_file())


def _package_folders(package: str) -> list[Path]:
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return []
    return [Path(p) for p in (spec.submodule_search_locations or [])] if spec else []


def find_cutlass_include(nvcc: Optional[str] = None) -> Optional[Path]:
    """$ADALN_BENCH_CUTLASS_INCLUDE, else the `nvidia-cutlass` wheel's copy (the `kernel` extra)."""
    chosen = os.environ.get("ADALN_BENCH_CUTLASS_INCLUDE")
    candidates = [Path(chosen)] if chosen else []
    candidates += [p / "source" / "include" for p in _package_folders("cutlass_library")]
    for c in candidates:
        if (c / "cute" / "tensor.hpp").exists() and (c / "cutlass" / "cutlass.h").exists():
            return c
    return None


def _cutlass_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("nvidia-cutlass")
    except PackageNotFoundError:
        return "unknown"


def find_curand_include(nvcc: Optional[str] = None) -> Optional[Path]:
    """$ADALN_BENCH_CURAND_INCLUDE, the toolkit's include folder beside nvcc, $CUDA_HOME/include,
    $CUDA_PATH/include, /usr/local/cuda/include, then the `nvidia-curand` wheel's (PyTorch's CUDA wheels need it)."""
    candidates: list[Path] = []
    if os.environ.get("ADALN_BENCH_CURAND_INCLUDE"):
        candidates.append(Path(os.environ["ADALN_BENCH_CURAND_INCLUDE"]))
    if nvcc:
        candidates.append(Path(os.path.realpath(nvcc)).parent.parent / "include")
    candidates += [Path(os.environ[v]) / "include" for v in ("CUDA_HOME", "CUDA_PATH") if os.environ.get(v)]
    candidates.append(Path("/usr/local/cuda/include"))
    candidates += [p / sub / "include" for p in _package_folders("nvidia") for sub in ("cu13", "curand", "cu12")]
    for c in candidates:
        if (c / "curand_kernel.h").is_file() and (c / "curand_philox4x32_x.h").is_file():
            return c
    return None


CUTLASS = HeaderSet("cutlass", find_cutlass_include,
                    "CUTLASS headers not found (pip install 'nvidia-cutlass==4.2.0.0', i.e. the 'kernel' extra, "
                    "or set ADALN_BENCH_CUTLASS_INCLUDE)", version=_cutlass_version)
CURAND = HeaderSet("curand", find_curand_include,
                   "curand's device headers (curand_kernel.h) not found: install the CUDA toolkit's curand or "
                   "`pip install nvidia-curand`, or set ADALN_BENCH_CURAND_INCLUDE", staged="curand*.h")
