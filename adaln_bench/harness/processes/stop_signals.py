"""SIGINT and SIGTERM stop a run the same way: finished modes kept, a report marked incomplete, no scratch left.

`timeout` and a CI cancel send SIGTERM, Ctrl-C sends SIGINT. The first signal raises KeyboardInterrupt in
the main thread, and only while the modes are running; any later one (a second Ctrl-C while the children
are being stopped) is noted and ignored, so the shutdown itself is never interrupted.
"""
from __future__ import annotations

import contextlib
import signal
import threading
from typing import Iterator, Optional

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class StopSignals:
    def __init__(self) -> None:
        self.received: Optional[int] = None
        self._armed = False
        self._previous: dict[int, object] = {}

    def __enter__(self) -> "StopSignals":
        if threading.current_thread() is threading.main_thread():  # handlers can only be set there
            for sig in STOP_SIGNALS:
                self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc) -> None:
        # Once stopping, the process only writes its report and exits: a late second signal must not land in
        # an atexit callback (seen: a KeyboardInterrupt traceback from torch's library finalizer), so the
        # handlers stay ignoring until exit.
        for sig, handler in self._previous.items():
            signal.signal(sig, signal.SIG_IGN if self.received is not None else handler)

    def _handle(self, signum: int, frame) -> None:
        if self.received is not None:
            return  # already stopping
        self.received = signum
        if self._armed:
            raise KeyboardInterrupt

    @contextlib.contextmanager
    def raising(self) -> Iterator[None]:
        """While inside, the first signal raises KeyboardInterrupt; outside it is only recorded."""
        if self.received is not None:
            raise KeyboardInterrupt
        self._armed = True
        try:
            yield
        finally:
            self._armed = False

    @property
    def exit_code(self) -> Optional[int]:
        """128 + the signal's number, as a shell reports a process that signal ended: 130 SIGINT, 143 SIGTERM."""
        return None if self.received is None else 128 + self.received

    def cause(self) -> str:
        """What stopped the run, as a report records it: which signal, not a guess at who sent it."""
        if self.received is None:
            return "interrupted"
        if self.received == signal.SIGINT:
            return "interrupted by SIGINT (Ctrl-C)"
        return f"stopped by {self.name}"

    @property
    def name(self) -> Optional[str]:
        return None if self.received is None else signal.Signals(self.received).name
