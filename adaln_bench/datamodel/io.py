"""Reading and writing reports: validated on the way in, written atomically on the way out."""
from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path
from dataclasses import dataclass
from typing import BinaryIO, Callable, Optional

from adaln_bench.errors import UserError
# Reading is the loader's (datamodel/load.py); its two entry points stay importable from here.
from adaln_bench.datamodel.load import parse_report, read_report  # noqa: F401
from adaln_bench.datamodel.schema import Report


def report_to_dict(report: Report) -> dict:
    return report.model_dump(mode="json", exclude_unset=True)


def report_to_json(report: Report) -> str:
    return json.dumps(report_to_dict(report), indent=2, allow_nan=False) + "\n"


def write_report(report: Report, path: str | os.PathLike[str]) -> Path:
    """Write to a temporary file beside the target, then rename: a reader never sees half a report."""
    return write_text_atomic(report_to_json(report), path)


@dataclass(frozen=True)
class Written:
    """Where a report went: its path, or where it was kept instead and why the target could not be written."""

    path: Path
    error: Optional[str] = None


def write_report_or_keep(report: Report, path: str | os.PathLike[str]) -> Written:
    """Write the report where asked; if that fails (a full or vanished disk), keep the measurements in the
    temporary directory instead, so that an hour of measuring is never lost to the last step."""
    text = report_to_json(report)
    try:
        return Written(write_text_atomic(text, path))
    except (UserError, OSError) as exc:
        error = str(exc) if isinstance(exc, UserError) else f"{path}: cannot write: {exc.strerror or exc}"
    kept_dir = Path(tempfile.gettempdir()) / "adaln-bench-kept"
    try:
        kept = _keep(text, kept_dir, Path(path).name)
    except OSError as exc:  # nowhere to write at all: the caller prints the summary regardless
        return Written(Path(path), f"{error}; and not kept in {kept_dir} either: {exc.strerror or exc}")
    return Written(kept.resolve(), error)


def _keep(text: str, folder: Path, name: str) -> Path:
    """A new file in `folder` named after `name` with the time and a random part (`r.20261204T181500.x1y2.json`):
    two runs that both keep a report keep both."""
    stem = name[:-len(".json")] if name.endswith(".json") else name
    folder.mkdir(parents=True, exist_ok=True)
    fd, kept = tempfile.mkstemp(prefix=f"{stem}.{time.strftime('%Y%m%dT%H%M%S')}.", suffix=".json", dir=folder)
    try:
        os.fchmod(fd, 0o666 & ~current_umask())
        with os.fdopen(fd, "wb") as fh:
            fh.write(text.encode("utf-8"))
            fh.flush()
            os.fsync(fh.fileno())
    except BaseException:
        Path(kept).unlink(missing_ok=True)
        raise
    return Path(kept)


def write_text_atomic(text: str, path: str | os.PathLike[str]) -> Path:
    return write_atomic(path, lambda fh: fh.write(text.encode("utf-8")))


def write_atomic(path: str | os.PathLike[str], write: Callable[[BinaryIO], object]) -> Path:
    """Write to a temporary file beside `path`, then rename it there: `path` is never half-written."""
    target = Path(path)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    except OSError as exc:
        raise UserError(f"{target}: cannot write: {exc.strerror or exc}") from None
    try:
        # mkstemp makes the file 0600; a report or a plot is for others to read too: 0666 less the umask.
        os.fchmod(fd, 0o666 & ~current_umask())
        with os.fdopen(fd, "wb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except OSError as exc:  # a full or vanished disk: one line for the user, the target untouched
        Path(tmp).unlink(missing_ok=True)
        raise UserError(f"{target}: cannot write: {exc.strerror or exc}") from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target


def current_umask() -> int:
    """The process umask, read without changing it where Linux allows (another thread may be creating files)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def check_writable(path: str | os.PathLike[str], directory: bool = False) -> Path:
    """Fail before hours of measuring, not after, when the report could not be written. `directory`: the
    path is a folder that will hold the reports.

    Tried, not asked: a file is created and removed in the nearest folder that exists. os.access answers yes
    to root for any path, /proc included, and knows nothing of a read-only mount."""
    target = Path(path)
    if directory:
        if target.exists() and not target.is_dir():
            raise UserError(f"{target}: is a file; with several operators --out names a directory")
        _probe(target, target)
        return target
    if target.is_dir():
        raise UserError(f"{target}: is a directory; --out takes a file path")
    _probe(target, target.parent)
    return target


def _probe(target: Path, folder: Path) -> None:
    probe_dir = folder
    while not probe_dir.exists() and probe_dir != probe_dir.parent:
        probe_dir = probe_dir.parent
    if not probe_dir.is_dir():
        raise UserError(f"{target}: cannot write there ({probe_dir} is not a directory)")
    try:
        fd, probe = tempfile.mkstemp(prefix=".adaln-bench-probe.", dir=probe_dir)
    except OSError as exc:
        raise UserError(f"{target}: cannot write there ({probe_dir}: {exc.strerror or exc})") from None
    os.close(fd)
    Path(probe).unlink(missing_ok=True)
