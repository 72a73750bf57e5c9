"""A wheel's RECORD: the SHA-256 of every file the wheel installs, as its builder wrote them.

RECORD holds `path,sha256=<urlsafe base64 without padding>,size`; reports and `sha256sum` use hex, so both
are converted here. Only the standard library is used: this also runs on the GPU machine.
"""
from __future__ import annotations

import base64
import csv
import hashlib
import io
import zipfile
from pathlib import Path


def record_digest_to_hex(entry: str) -> str:
    """`sha256=<urlsafe base64, no padding>` → lowercase hex; ValueError for any other algorithm."""
    algorithm, _, encoded = entry.partition("=")
    if algorithm != "sha256" or not encoded:
        raise ValueError(f"not a sha256 RECORD digest: {entry!r}")
    raw = base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4))
    if len(raw) != 32:
        raise ValueError(f"a sha256 digest has 32 bytes, this one {len(raw)}: {entry!r}")
    return raw.hex()


def hex_to_record_digest(hex_digest: str) -> str:
    return "sha256=" + base64.urlsafe_b64encode(bytes.fromhex(hex_digest)).decode().rstrip("=")


def parse_record(text: str) -> dict[str, str]:
    """path → hex SHA-256, for every RECORD row that has a digest (RECORD itself has none)."""
    digests = {}
    for row in csv.reader(io.StringIO(text)):
        if len(row) >= 2 and row[1]:
            digests[row[0]] = record_digest_to_hex(row[1])
    return digests


def dist_info_dir(names: list[str]) -> str:
    """The `<name>-<version>.dist-info/` folder among a wheel's member names."""
    found = {n.split("/", 1)[0] + "/" for n in names if n.split("/", 1)[0].endswith(".dist-info")}
    if len(found) != 1:
        raise ValueError(f"a wheel has one .dist-info folder, this one {sorted(found) or 'none'}")
    return found.pop()


def wheel_record(wheel: Path) -> dict[str, str]:
    with zipfile.ZipFile(wheel) as archive:
        folder = dist_info_dir(archive.namelist())
        return parse_record(archive.read(folder + "RECORD").decode())


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def file_sha256_hex(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
