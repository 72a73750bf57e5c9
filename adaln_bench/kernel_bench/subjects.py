"""The bundled projection libraries `kernel-bench --library` names, as subjects of the projection beside its
registered candidates (the stock path is cuBLAS).

A library is named by its code path ("sm90", "portable"), as NAME=PATH[:DEFINE,DEFINE...] for an
experiment build (sm90_config.h's defines), loaded from the kernel cache or built there, or as NAME=FILE.so
for a library built elsewhere (another commit's, to compare with in the same process).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import torch

CUBLAS = "cublas"  # the stock path's old name, refused as a library's
PATHS = ("sm90", "portable")
PROJECTION = "adaln_projection"


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
    if name in (CUBLAS, "stock", "copy"):
        raise SpecError(f"library {text!r}: {name!r} is the stock path's or the copy's name")
    if path not in PATHS:
        raise SpecError(f"library {text!r}: code path must be one of {', '.join(PATHS)}")
    defines = tuple(d for d in defs.split(",") if d)
    for d in defines:
        key, eq, value = d.partition("=")
        if not key.startswith("ADALN_") or not eq or not value:
            raise SpecError(f"library {text!r}: a define must look like ADALN_NAME=VALUE, got {d!r}")
    return LibrarySpec(name, path, defines)


def library_subject(op, spec: LibrarySpec, shape, device: torch.device, log=None):
    """A bundled projection library as the harness's Subject of the projection: (subject, its C library, what it
    is: code path, configuration and cache key)."""
    from adaln_bench.harness.measurement.subject import Subject
    from adaln_bench.kernels.bundled import build as B
    from adaln_bench.kernels.bundled.candidate import make_forward
    from adaln_bench.ops.candidates import Implementation

    if op.name != PROJECTION:
        raise ValueError(f"--library names a bundled projection library; {op.name} has none")
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
    what = f"bundled library {spec.path}" + (f" ({spec.file})" if spec.file else "") + \
        (f" with {', '.join(spec.defines)}" if spec.defines else "") + \
        f"; code path: {lib.path_name}; config: {lib.config}; library key: {key}"
    impl = Implementation(source=f"bundled library {spec.name}", has_backward=True, forward=make_forward(lib))
    return Subject.for_forward(op, impl, shape), lib, what
