"""The sglang-kernels set: SGLang 0.5.23 with its two AdaLN kernels, for the candidates named `sglang`.

- timestep_sinusoid: `sglang.kernels.ops.diffusion.modulate.timestep_embedding_jit.timestep_embedding`, a
  CUDA header that SGLang's JIT compiles at the first call (ninja, nvcc) and loads through apache-tvm-ffi.
- norm_modulate: `sglang.kernels.ops.diffusion.norm.scale_residual_norm_cutedsl.fused_norm_scale_shift`, a
  CuTe DSL kernel. Its files are staged, but nvidia-cutlass-dsl is not (too large to carry; docs/compat.md).

The set is one slimmed SGLang wheel: the sglang mode's files (sglang-0.5.23.files, with include/ and csrc/
whole) and the kernels' files listed in sglang-kernels-0.5.23.files, each pinned there by SHA-256. SGLang's
own sglang/__init__.py stays: nothing is shimmed, rewritten or added, so the same install also serves the
sglang mode. Beside it go the wheels SGLang's import needs (pins.SGLANG.needs) and pins.EXTRAS.
Only the standard library is used: `verify` runs on the GPU machine.
"""
from __future__ import annotations

import json
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable

from slim import pins
from slim.record import dist_info_dir, file_sha256_hex, parse_record
from slim.slim_wheel import read_manifest, write_slim_wheel

KERNEL_FILES = pins.HERE / f"sglang-kernels-{pins.SGLANG.version}.files"
OPERATORS = ("timestep_sinusoid", "norm_modulate")
BUILD_TAG = "0slimkernels"
_HEX = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True)
class KernelFile:
    op: str  # the operator whose `sglang` candidate loads it
    sha256: str  # hex
    path: str  # inside the wheel, from sglang/ on


def read_kernel_files(path: Path | None = None) -> list[KernelFile]:
    """`<operator> <sha256> <path>` a line (default: the committed list); `#` starts a comment. ValueError on
    anything else."""
    path = path or KERNEL_FILES
    files, seen = [], set()
    for number, raw in enumerate(path.read_text().splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        fields = line.split()
        if len(fields) != 3:
            raise ValueError(f"{path.name}:{number}: expected '<operator> <sha256> <path>', got {line!r}")
        op, digest, member = fields
        if op not in OPERATORS:
            raise ValueError(f"{path.name}:{number}: unknown operator {op!r} (one of {', '.join(OPERATORS)})")
        if not _HEX.fullmatch(digest):
            raise ValueError(f"{path.name}:{number}: {digest!r} is not a lowercase hex SHA-256")
        if not member.startswith("sglang/") or ".." in member.split("/"):
            raise ValueError(f"{path.name}:{number}: {member!r} is not a path inside the sglang package")
        if member in seen:
            raise ValueError(f"{path.name}:{number}: {member} is listed twice")
        seen.add(member)
        files.append(KernelFile(op, digest, member))
    return files


def check_against_record(files: Iterable[KernelFile], record: dict[str, str]) -> None:
    """Every pinned digest equals the wheel's RECORD entry: the list pins the same bytes the registry ships."""
    wrong = [f"{f.path} (RECORD {record[f.path]}, listed {f.sha256})" for f in files
             if f.path in record and record[f.path] != f.sha256]
    absent = [f.path for f in files if f.path not in record]
    if wrong or absent:
        raise ValueError("the kernel list does not match the wheel's RECORD: "
                         + "; ".join([*(f"not in the wheel: {p}" for p in absent), *wrong]))


def kernels_wheel_name(full: Path) -> str:
    """The registry wheel's name with build tag 0slimkernels (pip installs it the same)."""
    name, version, *tags = full.name[:-len(".whl")].split("-")
    return "-".join([name, version, BUILD_TAG, *tags[-3:]]) + ".whl"


def build(out: Path, wheel_of: Callable[..., Path], kernel_list: Path | None = None,
          mode_list: Path | None = None) -> dict:
    """Write out/whl/ (the slimmed SGLang and its dependency wheels) and out/kernels.json; return the latter.
    `wheel_of(name[, version])` finds a downloaded wheel; the two lists default to the committed ones."""
    import zipfile

    full = wheel_of(pins.SGLANG.name, pins.SGLANG.version)
    kernel_files = read_kernel_files(kernel_list)
    with zipfile.ZipFile(full) as archive:
        names = archive.namelist()
        record = parse_record(archive.read(dist_info_dir(names) + "RECORD").decode())
    check_against_record(kernel_files, record)
    if out.exists():
        shutil.rmtree(out)
    whl = out / "whl"
    files = list(dict.fromkeys([*read_manifest(mode_list or pins.SGLANG.manifest), *(f.path for f in kernel_files)]))
    target = whl / kernels_wheel_name(full)
    kept, size = write_slim_wheel(full, target, files, pins.SGLANG.keep_whole)
    wheels = {target.name: target.stat().st_size}
    for name in dict.fromkeys([*pins.SGLANG.needs, *pins.EXTRAS]):
        copied = Path(shutil.copy2(wheel_of(name), whl))
        wheels[copied.name] = copied.stat().st_size
    summary = {
        "sglang": pins.SGLANG.version,
        "from": {"wheel": full.name, "bytes": full.stat().st_size},
        "slim_wheel": {"name": target.name, "members": kept, "bytes_unpacked": size},
        "kernel_files": [{"op": f.op, "path": f.path, "sha256": f.sha256} for f in kernel_files],
        "wheels": wheels,
        "bytes": sum(wheels.values()),
    }
    (out / "kernels.json").write_text(json.dumps(summary, indent=1) + "\n")
    return summary


def verify(site: Path, files: Iterable[KernelFile] | None = None) -> list[str]:
    """What is wrong with the installed kernel files under `site` (empty: every one is there, unchanged)."""
    problems = []
    for f in read_kernel_files() if files is None else files:
        path = site / f.path
        if not path.is_file():
            problems.append(f"missing: {f.path}")
        elif file_sha256_hex(path) != f.sha256:
            problems.append(f"changed: {f.path} (SHA-256 {file_sha256_hex(path)}, pinned {f.sha256})")
    return problems
