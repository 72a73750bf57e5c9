"""Fresh processes without a fresh torch import, for the cold-start checks of a CPU run.

A new interpreter spends about 4 s of a core importing torch (and 4-6 s more importing diffusers) before a
cold-start check runs the ~10 ms it checks; a CPU run checks one candidate after another, so those imports
were a fifth of the bare run. The mode's child therefore forks a *server* right after its imports (torch; in
a mode without a framework switch, also the candidates' libraries), before its mode is switched on or any
torch operation has run, and the server forks once per check. Each check still runs in a process of its own
that has never switched the mode on, built or called a candidate, run autograd or started a thread pool:
what the check is about (harness/processes/cold_start.py). Only the imports are shared.

Only where forking is safe: on the CPU (a CUDA check keeps its own interpreter: a process that has touched
the CUDA driver must not fork, and CUDA's per-thread state is what the check exists for), on Linux, and while
the process has a single thread (several torch threads, e.g. OMP_NUM_THREADS > 1, start an OpenMP pool that a
forked process cannot use). Otherwise `start` returns None, and if the server dies each later check gets a new
interpreter (`fallback`), as before.
"""
from __future__ import annotations

import os
import select
import signal
import sys
import time
from dataclasses import dataclass
from typing import Callable, Literal, Optional

_STOP_WAIT_S = 5.0


@dataclass(frozen=True)
class Launched:
    """What a check's process left: its stdout and stderr, its exit code (negative: the signal; None: killed at
    the timeout), whether it timed out, and how the process was made."""

    stdout: str
    stderr: str
    code: Optional[int]
    timed_out: bool
    process: Literal["interpreter", "fork"] = "interpreter"


Main = Callable[[list[str]], int]  # the check's entry point, as `python -m` would call it
Launch = Callable[[str, float], Launched]  # (spec path, timeout) -> what the check's process left


def single_threaded() -> bool:
    try:
        return len(os.listdir("/proc/self/task")) == 1
    except OSError:  # not Linux: no way to tell, so no fork
        return False


def _exit_code(status: int) -> int:
    return -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)


class ForkServer:
    """The parent's handle: `launch(spec_path, timeout_s)` runs `main(["", spec_path])` in a new fork."""

    def __init__(self, pid: int, requests: int, replies: int, fallback: Launch):
        self.pid, self._requests, self._replies, self._fallback = pid, requests, replies, fallback
        self._buffer = b""
        self._gone = False  # the server died: later checks get interpreters
        self.forked = 0  # checks run in a fork: what the tests look at

    @classmethod
    def start(cls, main: Main, fallback: Launch) -> Optional["ForkServer"]:
        if not hasattr(os, "fork") or not single_threaded():
            return None
        sys.stdout.flush()
        sys.stderr.flush()
        req_r, req_w = os.pipe()
        rep_r, rep_w = os.pipe()
        pid = os.fork()
        if pid == 0:  # the server
            os.close(req_w)
            os.close(rep_r)
            try:
                _serve(main, req_r, rep_w)
            finally:
                os._exit(0)
        os.close(req_r)
        os.close(rep_w)
        return cls(pid, req_w, rep_r, fallback)

    def _line(self, deadline: Optional[float]) -> Optional[str]:
        """The server's next reply line; None at the deadline or when the server is gone."""
        while b"\n" not in self._buffer:
            wait = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready, _, _ = select.select([self._replies], [], [], wait)
            if not ready:
                return None
            chunk = os.read(self._replies, 4096)
            if not chunk:
                return None
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return line.decode()

    def launch(self, spec_path: str, timeout_s: float) -> Launched:
        """The check in a fork of the server; in a new interpreter when the server is gone."""
        started = None
        if not self._gone:
            try:
                os.write(self._requests, (spec_path + "\n").encode())
                started = self._line(time.monotonic() + _STOP_WAIT_S)
            except OSError:  # the server closed its end
                started = None
        if started is None or not started.startswith("pid "):
            self._gone = True
            return self._fallback(spec_path, timeout_s)
        self.forked += 1
        check_pid = int(started.split()[1])
        done = self._line(time.monotonic() + timeout_s)
        timed_out = done is None
        if timed_out:
            try:
                os.kill(check_pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self._line(time.monotonic() + _STOP_WAIT_S)  # the server reaps it and says so
        code = None if timed_out or done is None else int(done.split()[1])
        return Launched(read_text(spec_path + ".stdout"), read_text(spec_path + ".stderr"), code, timed_out, "fork")

    def close(self) -> None:
        """No more checks: the server sees the end of its requests and exits."""
        os.close(self._requests)
        deadline = time.monotonic() + _STOP_WAIT_S
        while time.monotonic() < deadline:
            if os.waitpid(self.pid, os.WNOHANG)[0]:
                break
            time.sleep(0.01)
        else:
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
        os.close(self._replies)


def read_text(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def _serve(main: Main, requests: int, replies: int) -> None:
    """The server: one fork per request line, `pid N` when it starts and `exit CODE` when it ended."""
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):  # hold none of the child's pipes: the parent reads its stdout to the end
        os.dup2(devnull, fd)
    with os.fdopen(requests, "rb") as lines:
        for raw in lines:
            spec_path = raw.decode().strip()
            pid = os.fork()
            if pid == 0:
                _check(main, spec_path, replies)
            os.write(replies, f"pid {pid}\n".encode())
            _, status = os.waitpid(pid, 0)
            os.write(replies, f"exit {_exit_code(status)}\n".encode())


def _check(main: Main, spec_path: str, replies: int) -> None:
    """One check's process: its output in files beside its spec, then `main`, then out (no atexit of the child)."""
    code = 1
    try:
        os.close(replies)
        for fd, suffix in ((1, ".stdout"), (2, ".stderr")):
            out = os.open(spec_path + suffix, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.dup2(out, fd)
            os.close(out)
        code = main(["", spec_path])
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:  # noqa: BLE001 - printed as an interpreter would, and an exit code of 1
        import traceback

        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)
