"""Which nvcc builds the kernel libraries, in one documented order, and its version for the build record.

1. ``$ADALN_BENCH_NVCC``: that file and no other (a wrong path is reported, never silently replaced);
2. ``$CUDA_HOME/bin/nvcc``, then ``$CUDA_PATH/bin/nvcc``, where that file exists;
3. ``nvcc`` on ``PATH``;
4. ``/usr/local/cuda/bin/nvcc``.
"""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Optional

NVCC_VARIABLE = "ADALN_BENCH_NVCC"
DEFAULT_NVCC = Path("/usr/local/cuda/bin/nvcc")


def _runnable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def find_nvcc() -> Optional[str]:
    """The nvcc to use (see the module docstring for the order), or None when there is none."""
    chosen = os.environ.get(NVCC_VARIABLE)
    if chosen:
        return chosen if _runnable(Path(chosen)) else None
    for home in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH")):
        if home and _runnable(Path(home) / "bin" / "nvcc"):
            return str(Path(home) / "bin" / "nvcc")
    on_path = shutil.which("nvcc")
    if on_path:
        return on_path
    return str(DEFAULT_NVCC) if _runnable(DEFAULT_NVCC) else None


def nvcc_missing() -> Optional[str]:
    """None when find_nvcc finds one, else what is wrong, in one line."""
    if find_nvcc() is not None:
        return None
    chosen = os.environ.get(NVCC_VARIABLE)
    if chosen:
        return f"{NVCC_VARIABLE}={chosen} is not an executable file"
    return f"nvcc not found (set {NVCC_VARIABLE} or CUDA_HOME, or put nvcc on PATH)"


def nvcc_version(nvcc: str) -> str:
    """nvcc's release line ("Cuda compilation tools, release 13.0, V13.0.48"), recorded beside each build."""
    try:
        out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        return f"unknown ({exc})"
    lines = [ln for ln in out.splitlines() if "release" in ln]
    return lines[-1].strip() if lines else out.strip()[-80:]
