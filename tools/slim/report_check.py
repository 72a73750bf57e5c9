"""Checking a report's framework rows against the wheels: is `module_sha256` the hash in the wheel's RECORD?

A stand-in package can carry the same version string as the real library, but not the same file bytes.
"""
from __future__ import annotations

import json
import re
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from slim.record import dist_info_dir, parse_record


@dataclass
class RowCheck:
    mode: str
    library: Optional[str]
    version: Optional[str]
    member: Optional[str]  # the file's path inside the wheel
    observed: Optional[str]
    recorded: Optional[str]
    verdict: str  # "matches", "differs", "no hash", "no wheel", "not in RECORD", "unavailable"

    @property
    def ok(self) -> bool:
        return self.verdict == "matches"


def _wheel_name(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def find_wheel(wheels: Path, library: str, version: str) -> Optional[Path]:
    """The wheel of `library` `version` in the folder `wheels` (a slimmed one keeps the registry's RECORD)."""
    for path in sorted(wheels.glob("*.whl")):
        parts = path.name.split("-")
        if len(parts) >= 2 and _wheel_name(parts[0]) == _wheel_name(library) and parts[1] == version:
            return path
    return None


def member_path(module_file: str, top: str) -> Optional[str]:
    """`/tmp/site/sglang/srt/x.py` → `sglang/srt/x.py`: the path from the last folder named `top` on."""
    parts = Path(module_file).parts
    for index in range(len(parts) - 1, -1, -1):
        if parts[index] == top:
            return "/".join(parts[index:])
    return None


def check_report(report_path: Path, wheels: Path) -> list[RowCheck]:
    """One check per mode whose observation names a library (the framework modes)."""
    report = json.loads(report_path.read_text())
    checks = []
    for mode, run in (report.get("modes") or {}).items():
        observed = run.get("observed") or {}
        library, version = observed.get("library"), observed.get("library_version")
        if not library:
            continue
        check = RowCheck(mode, library, version, None, observed.get("module_sha256"), None, "unavailable")
        checks.append(check)
        if run.get("status") != "ok":
            continue
        if not check.observed or not observed.get("module_file"):
            check.verdict = "no hash"
            continue
        wheel = find_wheel(wheels, library, version or "")
        if wheel is None:
            check.verdict = "no wheel"
            continue
        with zipfile.ZipFile(wheel) as archive:
            names = archive.namelist()
            record = parse_record(archive.read(dist_info_dir(names) + "RECORD").decode())
        tops = {n.split("/", 1)[0] for n in names if "/" in n and not n.split("/", 1)[0].endswith(".dist-info")}
        members = [m for m in (member_path(observed["module_file"], top) for top in tops) if m in record]
        if not members:
            check.verdict = "not in RECORD"
            continue
        check.member, check.recorded = members[0], record[members[0]]
        check.verdict = "matches" if check.recorded == check.observed else "differs"
    return checks
