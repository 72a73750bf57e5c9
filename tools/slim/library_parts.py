"""vLLM's compiled library in two parts: one call of the device tool carries at most 64 MiB.

`split_library` (here) compresses the library with xz -9e and cuts the result in two, writing a JSON
description with the SHA-256 of the library, of the compressed whole and of each part. On the GPU machine
`stage_part` copies part 1 out of the working tree (first call), and `join_library` (second call) joins the
parts, checks every hash, decompresses, checks the library against its wheel's RECORD and writes it into
the install. Standard library only: this runs on the GPU machine too.
"""
from __future__ import annotations

import json
import lzma
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path

from slim.record import file_sha256_hex, parse_record, sha256_hex

DESCRIPTION = "library.json"


@dataclass
class Part:
    name: str
    size: int
    sha256: str


@dataclass
class LibraryParts:
    member: str  # the path inside the wheel and the install, e.g. vllm/_C_stable_libtorch.abi3.so
    wheel: str  # the registry wheel it came from
    dist_info: str  # that wheel's .dist-info folder, whose RECORD names the library's hash
    size: int
    sha256: str  # of the library itself (hex); equal to its RECORD entry
    xz_size: int
    xz_sha256: str
    parts: list[Part]

    def write(self, folder: Path) -> Path:
        path = folder / DESCRIPTION
        path.write_text(json.dumps(asdict(self), indent=1) + "\n")
        return path

    @classmethod
    def read(cls, path: Path) -> "LibraryParts":
        data = json.loads(path.read_text())
        data["parts"] = [Part(**p) for p in data["parts"]]
        return cls(**data)


def compress(data: bytes) -> bytes:
    """xz at its strongest preset (xz -9e): 92.6 MB → about 61 MiB. The output depends only on the input."""
    return lzma.compress(data, format=lzma.FORMAT_XZ, check=lzma.CHECK_CRC64, preset=9 | lzma.PRESET_EXTREME)


def split_library(data: bytes, member: str, wheel: str, dist_info: str, record_sha256: str,
                  folders: tuple[Path, Path]) -> LibraryParts:
    """Compress `data`, write its two halves into `folders` (part 1, part 2) and the description into both."""
    if sha256_hex(data) != record_sha256:
        raise ValueError(f"{member} does not match its RECORD hash in {wheel}")
    packed = compress(data)
    half = (len(packed) + 1) // 2
    stem = Path(member).name + ".xz"
    parts = []
    for index, (folder, chunk) in enumerate(zip(folders, (packed[:half], packed[half:])), start=1):
        folder.mkdir(parents=True, exist_ok=True)
        name = f"{stem}.part{index}"
        (folder / name).write_bytes(chunk)
        parts.append(Part(name=name, size=len(chunk), sha256=sha256_hex(chunk)))
    description = LibraryParts(member=member, wheel=wheel, dist_info=dist_info, size=len(data),
                               sha256=record_sha256, xz_size=len(packed), xz_sha256=sha256_hex(packed), parts=parts)
    for folder in folders:
        description.write(folder)
    return description


def _checked_part(folder: Path, part: Part) -> bytes:
    path = folder / part.name
    if not path.is_file():
        raise FileNotFoundError(f"{path}: part missing (was the first call's staging done on this machine?)")
    data = path.read_bytes()
    if len(data) != part.size or sha256_hex(data) != part.sha256:
        raise ValueError(f"{path}: {len(data)} bytes, SHA-256 {sha256_hex(data)}; expected {part.size}, {part.sha256}")
    return data


def stage_part(source: Path, target: Path, index: int = 1) -> Path:
    """Copy part `index` and the description from the carried folder to `target`, checking the part's hash."""
    description = LibraryParts.read(source / DESCRIPTION)
    part = description.parts[index - 1]
    _checked_part(source, part)
    target.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source / part.name, target / part.name)
    shutil.copyfile(source / DESCRIPTION, target / DESCRIPTION)
    _checked_part(target, part)
    return target / part.name


def join_library(folders: tuple[Path, Path], site: Path) -> Path:
    """Join part 1 (from folders[0]) and part 2 (folders[1]); check; write the library into `site`."""
    description = LibraryParts.read(folders[1] / DESCRIPTION)
    first = LibraryParts.read(folders[0] / DESCRIPTION)
    if first.xz_sha256 != description.xz_sha256:
        raise ValueError(f"the staged part 1 belongs to another build ({first.xz_sha256[:12]} ≠ "
                         f"{description.xz_sha256[:12]}): run the first call again")
    packed = b"".join(_checked_part(folder, part) for folder, part in zip(folders, description.parts))
    if sha256_hex(packed) != description.xz_sha256:
        raise ValueError("the joined parts do not match the compressed library's SHA-256")
    data = lzma.decompress(packed, format=lzma.FORMAT_XZ)
    if len(data) != description.size or sha256_hex(data) != description.sha256:
        raise ValueError(f"{description.member}: decompressed, it does not match SHA-256 {description.sha256}")
    record = site / description.dist_info / "RECORD"
    if record.is_file():  # the installed wheel's RECORD names the library too: a second, independent check
        expected = parse_record(record.read_text()).get(description.member)
        if expected is not None and expected != description.sha256:
            raise ValueError(f"{record} names another SHA-256 for {description.member}: {expected}")
    target = site / description.member
    partial = target.with_name(target.name + ".partial")
    partial.write_bytes(data)
    partial.chmod(0o755)
    partial.replace(target)
    if file_sha256_hex(target) != description.sha256:
        raise ValueError(f"{target}: written, but its SHA-256 differs")
    return target
