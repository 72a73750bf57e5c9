"""What the report records about the machine, the libraries and the tool itself (docs/spec.md#9-the-report)."""
from __future__ import annotations

import os
import platform
import socket
import subprocess
from importlib import metadata
from pathlib import Path
from typing import Optional

from adaln_bench.datamodel.schema import Environment

# Report key -> distribution names to try, in order (a library is published under more than one name).
LIBRARIES: dict[str, tuple[str, ...]] = {
    "torch": ("torch",),
    "triton": ("triton", "pytorch-triton"),
    "diffusers": ("diffusers",),
    "vllm": ("vllm",),
    "flashinfer-python": ("flashinfer-python", "flashinfer"),
    "sglang": ("sglang",),
    "liger-kernel": ("liger-kernel", "liger_kernel"),
    "transformer_engine": ("transformer_engine", "transformer-engine", "transformer_engine_torch"),
    "megatron-core": ("megatron-core", "megatron_core"),
}


def library_version(names: tuple[str, ...]) -> Optional[str]:
    for name in names:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return None


def library_versions() -> dict[str, Optional[str]]:
    return {key: library_version(names) for key, names in LIBRARIES.items()}


def git_state(path: Path) -> tuple[Optional[str], Optional[bool]]:
    """The commit of the checkout holding `path`, and whether its tracked files differ from it."""
    try:
        commit = subprocess.run(["git", "-C", str(path), "rev-parse", "HEAD"], capture_output=True,
                                text=True, timeout=10, check=True).stdout.strip()
        status = subprocess.run(["git", "-C", str(path), "status", "--porcelain", "--untracked-files=no"],
                                capture_output=True, text=True, timeout=10, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return None, None
    return commit or None, bool(status.strip())


def rl_kernel_commit() -> Optional[str]:
    """The commit of an installed RL-Kernel checkout (the reference report's `rl_kernel_commit`), if any."""
    import importlib.util

    try:
        spec = importlib.util.find_spec("rl_engine")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.origin:
        return None
    return git_state(Path(spec.origin).resolve().parent)[0]


def tool_root() -> Path:
    """The folder that holds the adaln_bench package (a checkout's root), wherever this module sits in it."""
    import adaln_bench

    return Path(adaln_bench.__file__).resolve().parents[1]


def tool_git_state() -> tuple[Optional[str], Optional[bool]]:
    """This tool's commit and dirty flag. A copy of the tree (a remote GPU machine, an unpacked artifact) can
    name them in ADALN_BENCH_COMMIT and ADALN_BENCH_DIRTY=0|1; when set, they win over the copy's own .git,
    which may be stale (the GPU machine's copy carried the session's first commit)."""
    if os.environ.get("ADALN_BENCH_COMMIT"):
        return os.environ["ADALN_BENCH_COMMIT"], os.environ.get("ADALN_BENCH_DIRTY", "0") == "1"
    return git_state(tool_root())


def gpu_slug() -> str:
    """A short directory name for the GPU model ('h200', 'b200'), found without initialising CUDA here."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                             text=True, timeout=20).stdout.strip().splitlines()
    except (OSError, subprocess.SubprocessError):
        out = []
    if not out:
        return "gpu"
    return slug_of(out[0])


def slug_of(gpu_name: str) -> str:
    for token in gpu_name.replace("-", " ").split():
        t = token.lower()
        if any(c.isdigit() for c in t) and t[0].isalpha():
            return t
    return "gpu"


def torch_environment(device: str) -> Environment:
    """The environment as a process with torch imported sees it; CUDA is touched only for a CUDA run."""
    import torch

    gpu = capability = None
    extra = {}
    if device == "cuda":
        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        gpu, capability = props.name, [props.major, props.minor]
        if os.environ.get("CUDA_MPS_PIPE_DIRECTORY"):  # set by `run --mps` only where its daemon works
            extra["mps"] = True
    return Environment(
        gpu=gpu,
        capability=capability,
        torch=torch.__version__,
        cuda=torch.version.cuda,
        python=platform.python_version(),
        tf32=bool(torch.backends.cuda.matmul.allow_tf32),
        libraries=library_versions(),
        device=device,
        hostname=socket.gethostname(),
        platform=f"{platform.system()} {platform.machine()}",
        cpu_threads=torch.get_num_threads() if device == "cpu" else None,
        **extra,
    )
