"""Reading a file that comes from elsewhere without trusting it: a regular file of bounded size, or one line
saying why not (a FIFO or a device named as a file would hang the reader or never end)."""
from __future__ import annotations

import os
import stat
from pathlib import Path

from adaln_bench.errors import NotAReportError, UserError

# How much of a report's own text (a key, a value) a message quotes.
QUOTE_CHARS = 80


def one_line(text: str, limit: int = QUOTE_CHARS) -> str:
    """Text from a report or a file name, fit for a one-line message: control characters shown as escapes,
    cut to `limit` characters."""
    shown = text.encode("unicode_escape").decode("ascii") if not text.isprintable() else text
    return shown if len(shown) <= limit else shown[:limit - 1] + "…"


REASON_CHARS = 240


def reason_line(text: str) -> str:
    """A reason (a child's error, perhaps several lines) on one line of at most REASON_CHARS characters."""
    return one_line(" ".join(text.split()), REASON_CHARS)


def reason_suffix(reason: str | None, shown: bool) -> str:
    """`: <reason on one line>` for the end of a status line where `shown` and there is a reason; else empty."""
    return f": {reason_line(reason)}" if reason and shown else ""


def read_limited(path: str | os.PathLike[str], limit: int, what: str) -> bytes:
    """The bytes of a regular file of at most `limit` bytes (`what` it should be, for messages), or a UserError. The type is checked before
    opening (opening a FIFO waits for a writer), and again on the open file (it may have been swapped)."""
    p = Path(path)
    name = one_line(str(p), 400)
    try:
        info = os.stat(p)
    except FileNotFoundError:
        raise UserError(f"{name}: no such file") from None
    except OSError as exc:  # a symlink loop, a name too long, no permission
        raise UserError(f"{name}: cannot read: {exc.strerror or exc}") from None
    _check_type(info, name, limit, what)
    try:
        fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise UserError(f"{name}: cannot read: {exc.strerror or exc}") from None
    try:
        _check_type(os.fstat(fd), name, limit, what)
        chunks, left = [], limit + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
    except OSError as exc:
        raise UserError(f"{name}: cannot read: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if len(data) > limit:
        raise NotAReportError(f"{name}: larger than {what} can be ({size_text(limit)})")
    return data


def _check_type(info: os.stat_result, name: str, limit: int, what: str) -> None:
    if stat.S_ISDIR(info.st_mode):
        raise UserError(f"{name}: is a directory, not {what}")
    if not stat.S_ISREG(info.st_mode):
        raise NotAReportError(f"{name}: not a regular file ({_file_kind(info.st_mode)}), so not {what}")
    if info.st_size > limit:
        raise NotAReportError(f"{name}: {size_text(info.st_size)}, larger than {what} can be ({size_text(limit)})")


def _file_kind(mode: int) -> str:
    for test, kind in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return kind
    return "not a regular file"


def size_text(n: int) -> str:
    return f"{n / 2 ** 20:.0f} MiB" if n >= 2 ** 20 else f"{n} bytes"
