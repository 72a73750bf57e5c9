"""Where a report comes from on the command line: a file, or `REV:path` read from git with `git show`.

An existing file wins over the git reading, so a file whose name holds a colon still reads as a file.
`path` is git's: from the repository root, or `./path` from the current directory.
"""
from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from adaln_bench.errors import UserError
from adaln_bench.datamodel.io import parse_report, read_report
from adaln_bench.bounded_read import size_text
from adaln_bench.datamodel.load import MAX_REPORT_BYTES, Document, parse_document, read_document
from adaln_bench.datamodel.schema import Report


@dataclass(frozen=True)
class ReportSource:
    """What the user named: a file path, or a revision and a path inside the repository."""

    text: str
    path: str
    rev: Optional[str] = None

    @property
    def is_git(self) -> bool:
        return self.rev is not None


def parse_source(text: str, cwd: Optional[str | os.PathLike[str]] = None) -> ReportSource:
    if not text:
        raise UserError("an empty report argument: name a file or REV:path")
    base = Path(cwd) if cwd is not None else Path.cwd()
    if (base / text).exists() or ":" not in text:
        return ReportSource(text, text)
    rev, _, path = text.partition(":")
    if not rev or not path:
        raise UserError(f"{text}: expected a file or REV:path (both parts non-empty)")
    if rev.startswith("-"):
        raise UserError(f"{text}: a revision cannot start with '-'")
    return ReportSource(text, path, rev)


def _check_blob(spec: str, cwd) -> None:
    """Refuse, before reading it, what is not a file or is larger than any report may be: `git show` would
    print a folder's listing, or read a huge blob whole into memory."""
    proc = subprocess.run(["git", "cat-file", "--batch-check"], input=f"{spec}\n".encode(), cwd=cwd,
                          capture_output=True, timeout=60, check=False)
    fields = proc.stdout.decode("utf-8", "replace").split()
    if proc.returncode != 0 or len(fields) != 3:
        return  # not a repository, or a bad rev or path: `git show` below says which in git's words
    kind, size = fields[1], fields[2]
    if kind != "blob":
        raise UserError(f"{spec}: a {kind} in git, not a report file")
    if size.isdigit() and int(size) > MAX_REPORT_BYTES:
        raise UserError(f"{spec}: {size_text(int(size))} in git, more than a report may be "
                        f"({size_text(MAX_REPORT_BYTES)})")


def git_show(rev: str, path: str, cwd: Optional[str | os.PathLike[str]] = None) -> bytes:
    """The text of `path` at `rev` in the repository around `cwd`; a bad rev or path is a UserError."""
    spec = f"{rev}:{path}"
    try:
        _check_blob(spec, cwd)
        proc = subprocess.run(
            ["git", "show", spec], cwd=cwd, capture_output=True, timeout=60, check=False,
        )
    except FileNotFoundError:
        raise UserError(f"{spec}: reading a report from git needs the git command, and it is not installed") from None
    except subprocess.TimeoutExpired:
        raise UserError(f"{spec}: git show did not answer within 60 s") from None
    if proc.returncode != 0:
        message = proc.stderr.decode("utf-8", "replace").strip().splitlines()
        first = message[0] if message else f"git show exited with {proc.returncode}"
        raise UserError(f"{spec}: {first.removeprefix('fatal: ')}")
    return proc.stdout  # the loader decodes it, and refuses what is not UTF-8 or too large


def load_report(text: str, cwd: Optional[str | os.PathLike[str]] = None) -> Report:
    """Read the report a command-line argument names: a file, or REV:path from git."""
    source = parse_source(text, cwd)
    if source.is_git:
        return parse_report(git_show(source.rev, source.path, cwd), source.text)
    return read_report(_local(source, cwd))  # a directory, a FIFO or a device gets its one line there


def load_document(text: str, cwd: Optional[str | os.PathLike[str]] = None) -> Document:
    """As load_report, for the commands that also read a kernel-bench output (`report`, `diff`)."""
    source = parse_source(text, cwd)
    if source.is_git:
        return parse_document(git_show(source.rev, source.path, cwd), source.text)
    return read_document(_local(source, cwd))


def _local(source: ReportSource, cwd: Optional[str | os.PathLike[str]]) -> Path:
    path = Path(source.path)
    return Path(cwd) / path if cwd is not None and not path.is_absolute() else path
