"""The calling convention the libraries' C interfaces share: a launching entry point returns a status and writes
its message into a buffer the caller passes last, with the buffer's length."""
from __future__ import annotations

import ctypes
import threading
from typing import Callable

MESSAGE_BYTES = 1024
_BUFFERS = threading.local()  # one buffer a thread: autograd's device thread calls the backward entries


def error_buffer() -> ctypes.Array:
    """This thread's message buffer (made once: a new one a call costs host time on every launch)."""
    buf = getattr(_BUFFERS, "buf", None)
    if buf is None:
        buf = _BUFFERS.buf = ctypes.create_string_buffer(MESSAGE_BYTES)
    return buf


def call_checked(entry: Callable[..., int], args: tuple, status_name: Callable[[int], str], what: str) -> None:
    """entry(*args, buffer, length); RuntimeError with the status's name and the message when it is not 0 (a
    failed call launched nothing after the failing step, so this is an ordinary exception)."""
    buf = error_buffer()
    buf[0] = b"\0"  # no stale message from an earlier failure
    rc = entry(*args, buf, MESSAGE_BYTES)
    if rc != 0:
        msg = buf.value.decode(errors="replace") or "no message"
        raise RuntimeError(f"{what} failed ({status_name(rc)}, status {rc}): {msg}")
