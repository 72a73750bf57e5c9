"""A Python entry point in a process of its own, started as a fork of a server that has imported torch.

`python SCRIPT` or `python -m MODULE` in a new interpreter spends 2-3 s of CPU importing torch before it does
anything, and tests that start dozens of them (the mode drivers, the CLI's refusals of bad input) spent most of
their time there. `run` gives the same process boundary without that import: its own pid, environment, working
directory, sys.path (what a new interpreter builds from PYTHONPATH), sys.argv, stdin (empty), stdout and stderr
(read back as subprocess.run(capture_output=True, text=True) would), atexit handlers and exit code (-N when a
signal N ended it), with torch imported first, by a process that has run no torch operation (forking is then
safe; the harness forks its CPU cold-start checks the same way: adaln_bench/harness/processes/fork_server.py).

What differs from a new interpreter: torch was imported under the server's environment and sys.path, not the
case's. So this is for tests whose subject is not the interpreter's start-up; a test that is about that (which
interpreter, which copy of the source, what the environment makes of an import) keeps conftest.run_cli or
subprocess. The server (one per pytest worker) starts on first use and ends with the worker.
"""
from __future__ import annotations

import atexit
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# The server: imports torch, then for each request line forks a child that becomes the requested program.
_SERVER = r"""
import json, os, sys
import torch  # noqa: F401 - the import every child would otherwise repeat

requests, replies = sys.stdin.buffer, sys.stdout.buffer

def child(req):
    import atexit, runpy
    for fd, path, flags in ((0, os.devnull, os.O_RDONLY), (1, req["stdout"], os.O_WRONLY), (2, req["stderr"], os.O_WRONLY)):
        new = os.open(path, flags)
        os.dup2(new, fd)
        os.close(new)
    sys.stdin = sys.__stdin__ = open(0, closefd=False)
    sys.stdout = sys.__stdout__ = open(1, "w", closefd=False)
    sys.stderr = sys.__stderr__ = open(2, "w", closefd=False, errors="backslashreplace")
    os.chdir(req["cwd"])
    os.environ.clear()
    os.environ.update(req["env"])
    kind, target = req["kind"], req["target"]
    first = os.path.dirname(os.path.realpath(target)) if kind == "script" else os.getcwd()
    extra = [os.path.abspath(p) for p in req["env"].get("PYTHONPATH", "").split(os.pathsep) if p]
    sys.path[:] = [first, *extra, *req["base_path"]]
    sys.argv = [target, *req["argv"]]
    code = 0
    try:
        if kind == "script":
            runpy.run_path(target, run_name="__main__")
        else:  # as -m: the module's file in sys.argv[0], the module as __main__
            runpy.run_module(target, run_name="__main__", alter_sys=True)
    except SystemExit as exc:
        code = exc.code
    except BaseException:  # what an interpreter does with an uncaught exception
        sys.excepthook(*sys.exc_info())
        code = 1
    try:
        import threading
        threading._shutdown()  # as at an interpreter's exit: its other (non-daemon) threads first, then atexit
        atexit._run_exitfuncs()
        if code is not None and not isinstance(code, int):
            print(code, file=sys.stderr)
            code = 1
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code or 0)

for line in requests:
    req = json.loads(line)
    pid = os.fork()
    if pid == 0:
        try:
            requests.close()
            replies.close()
            child(req)
        finally:
            os._exit(70)
    replies.write((json.dumps({"pid": pid}) + "\n").encode())
    replies.flush()
    _, status = os.waitpid(pid, 0)
    replies.write((json.dumps({"returncode": os.waitstatus_to_exitcode(status)}) + "\n").encode())
    replies.flush()
"""

_server: "subprocess.Popen | None" = None
_base_path: "list[str] | None" = None


def _start() -> subprocess.Popen:
    global _server, _base_path
    if _server is None or _server.poll() is not None:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        # sys.path of a new interpreter less its first entry and PYTHONPATH's: the standard library,
        # site-packages and what their .pth files add.
        _base_path = json.loads(subprocess.run(
            [sys.executable, "-c", "import json, sys; print(json.dumps(sys.path[1:]))"], env=env,
            capture_output=True, text=True, check=True, timeout=60).stdout)
        _server = subprocess.Popen([sys.executable, "-c", _SERVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                   env=env, cwd=tempfile.gettempdir())
        atexit.register(_stop)
    return _server


def _stop() -> None:
    if _server is not None and _server.poll() is None:
        _server.stdin.close()
        try:
            _server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            _server.kill()


def _reply(server: subprocess.Popen, deadline: float) -> "dict | None":
    """The server's next line, or None when the deadline passes first."""
    fd = server.stdout.fileno()
    line = b""
    while not line.endswith(b"\n"):
        ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            return None
        chunk = os.read(fd, 1)
        if not chunk:
            raise RuntimeError("the fork server of tests/forked.py has gone")
        line += chunk
    return json.loads(line)


def run(kind: str, target: str, argv: "list[str]", env: dict, cwd: Path, timeout: float) -> subprocess.CompletedProcess:
    """`python TARGET ARGV...` (kind "script") or `python -m TARGET ARGV...` (kind "module") in a fork of the
    server, with exactly `env` as its environment; returns what subprocess.run(capture_output=True, text=True)
    would, and raises subprocess.TimeoutExpired (the child killed) past `timeout` seconds."""
    if kind not in ("script", "module"):
        raise ValueError(kind)
    server = _start()
    with tempfile.TemporaryDirectory(prefix="forked-") as tmp:
        out_path, err_path = os.path.join(tmp, "stdout"), os.path.join(tmp, "stderr")
        for p in (out_path, err_path):
            open(p, "wb").close()
        request = {"kind": kind, "target": str(target), "argv": [str(a) for a in argv], "env": dict(env),
                   "cwd": str(cwd), "stdout": out_path, "stderr": err_path, "base_path": _base_path}
        server.stdin.write((json.dumps(request) + "\n").encode())
        server.stdin.flush()
        pid = _reply(server, time.monotonic() + 60)["pid"]
        done = _reply(server, time.monotonic() + timeout)
        if done is None:
            os.kill(pid, signal.SIGKILL)
            _reply(server, time.monotonic() + 60)
            raise subprocess.TimeoutExpired([target, *argv], timeout)
        with open(out_path, encoding="utf-8", errors="replace") as f:
            stdout = f.read()
        with open(err_path, encoding="utf-8", errors="replace") as f:
            stderr = f.read()
    return subprocess.CompletedProcess([target, *argv], done["returncode"], stdout, stderr)
