"""Making a slimmed wheel: the same files, byte for byte, minus those the switch's import never loads.

Nothing is rewritten: each kept member is copied from the registry's wheel after its SHA-256 is checked
against the wheel's own RECORD, and the whole .dist-info folder (METADATA, RECORD, WHEEL, ...) is kept, so
that `importlib.metadata.version()` answers and the installed RECORD still names the original hashes.
"""
from __future__ import annotations

import zipfile
from pathlib import Path
from typing import Iterable

from slim.record import dist_info_dir, parse_record, sha256_hex

# A fixed timestamp, so that two builds from the same wheel give the same bytes.
_EPOCH = (1980, 1, 1, 0, 0, 0)


def read_manifest(path: Path) -> list[str]:
    """The files listed by `trace`, one a line; `#` starts a comment."""
    lines = (line.split("#", 1)[0].strip() for line in path.read_text().splitlines())
    return [line for line in lines if line]


def select_members(names: Iterable[str], files: Iterable[str], folders: Iterable[str]) -> list[str]:
    """The wheel members to keep: the listed files, everything under the listed folders, and the .dist-info."""
    names = list(names)
    present = set(names)
    missing = sorted(set(files) - present)
    if missing:
        raise ValueError(f"{len(missing)} listed files are not in the wheel, e.g. {missing[:3]}")
    prefixes = tuple(folders) + (dist_info_dir(names),)
    wanted = set(files)
    return [n for n in names if n in wanted or n.startswith(prefixes)]


def write_slim_wheel(full: Path, out: Path, files: Iterable[str], folders: Iterable[str],
                     leave_out: Iterable[str] = ()) -> tuple[int, int]:
    """Copy the selected members of `full` into the wheel `out`; return (members kept, bytes uncompressed)."""
    leave_out = set(leave_out)
    with zipfile.ZipFile(full) as source:
        names = [i.filename for i in source.infolist() if not i.is_dir()]
        record = parse_record(source.read(dist_info_dir(names) + "RECORD").decode())
        kept = [n for n in select_members(names, files, folders) if n not in leave_out]
        total = 0
        out.parent.mkdir(parents=True, exist_ok=True)
        partial = out.with_name(out.name + ".partial")
        with zipfile.ZipFile(partial, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=9) as target:
            for name in kept:
                data = source.read(name)
                if name in record and sha256_hex(data) != record[name]:
                    raise ValueError(f"{full.name}: {name} does not match its RECORD hash")
                info = zipfile.ZipInfo(name, date_time=_EPOCH)
                info.external_attr = source.getinfo(name).external_attr
                info.compress_type = zipfile.ZIP_DEFLATED
                target.writestr(info, data)
                total += len(data)
        partial.replace(out)
    return len(kept), total
