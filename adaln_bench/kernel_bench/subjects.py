"""What `kernel-bench` times: the plain cuBLAS path and bundled kernel libraries named on the command line.

A library is named by its code path ("sm90", "portable"), as NAME=PATH[:DEFINE,DEFINE...] for an
experiment build (sm90_config.h's defines), loaded from the kernel cache or built there, or as NAME=FILE.so
for a library built elsewhere (another commit's, to compare with in the same process).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

import torch

CUBLAS = "cublas"
PATHS = ("sm90", "portable")


class SpecError(ValueError):
    """A library named in a form kernel-bench does not know."""


@dataclass(frozen=True)
class LibrarySpec:
    name: str
    path: str  # "sm90", "portable", or "file"
    defines: tuple[str, ...] = ()
    file: str = ""


def parse_library(text: str) -> LibrarySpec:
    """"sm90", "portable", "NAME=PATH[:DEFINE,DEFINE...]" or "NAME=FILE.so"."""
    text = text.strip()
    name, sep, rest = text.partition("=")
    if not sep:
        name, rest = text, text
    if rest.endswith(".so"):
        if not name or not name.replace("_", "").replace("-", "").isalnum():
            raise SpecError(f"library {text!r}: the name must be letters, digits, '_' or '-'")
        return LibrarySpec(name, "file", (), rest)
    path, _, defs = rest.partition(":")
    if not name or not name.replace("_", "").replace("-", "").isalnum():
        raise SpecError(f"library {text!r}: the name must be letters, digits, '_' or '-'")
    if name == CUBLAS:
        raise SpecError(f"library {text!r}: {CUBLAS!r} is the baseline's name")
    if path not in PATHS:
        raise SpecError(f"library {text!r}: code path must be one of {', '.join(PATHS)}")
    defines = tuple(d for d in defs.split(",") if d)
    for d in defines:
        key, eq, value = d.partition("=")
        if not key.startswith("ADALN_") or not eq or not value:
            raise SpecError(f"library {text!r}: a define must look like ADALN_NAME=VALUE, got {d!r}")
    return LibrarySpec(name, path, defines)


@dataclass
class Subject:
    """One thing timed: a differentiable forward (temb, W, b) -> Y, and for a library its C entry points."""

    name: str
    forward: Callable
    library: Optional[object] = None  # build.Library for a bundled subject
    info: dict = field(default_factory=dict)


def cublas_subject() -> Subject:
    from adaln_bench.ops.adaln_projection import replay

    return Subject(CUBLAS, replay, None, {"kind": "cublas", "what": "F.linear(F.silu(temb).to(bf16), W, b) + autograd"})


def library_subject(spec: LibrarySpec, device: torch.device, log=None) -> Subject:
    from adaln_bench.kernels.bundled import build as B
    from adaln_bench.kernels.bundled.candidate import make_forward

    major, minor = torch.cuda.get_device_capability(device)
    if spec.path == "file":
        meta_path = Path(spec.file).parent / "meta.json"
        meta = json.loads(meta_path.read_text()) if meta_path.exists() else {}
        base = B.target_for_capability(major, minor, forced_path=meta.get("path"))
        lib = B.Library(Path(spec.file), base, meta)
        key = meta.get("key", "unknown")
    else:
        base = B.target_for_capability(major, minor, forced_path=spec.path)
        target = B.Target(base.path, base.arch, base.cc, spec.defines)
        lib = B.load(target, log=log)
        key = B.cache_key(target)
    info = {"kind": "bundled", "path": spec.path, "defines": list(spec.defines), "file": spec.file,
            "code_path": lib.path_name, "config": lib.config, "library_key": key}
    return Subject(spec.name, make_forward(lib), lib, info)
