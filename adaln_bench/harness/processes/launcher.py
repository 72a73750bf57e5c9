"""The one child protocol: how a parent starts a fresh Python interpreter that measures something, and reads back
what it measured.

The parent writes a typed spec (a `ProtocolSpec`, which names the child's result file) and starts
`python -m MODULE SPEC.json` (`launch`), by default in a session of its own so that stopping it stops every
process it started; its stderr, and its stdout unless the parent reads that line by line, go to a log file. The
child validates the spec and writes its typed result atomically, as often as it likes (`child_main`), so that a
crash keeps what it finished. The parent waits up to a timeout (`Child.wait`), kills the child when it is past it
or when the parent itself is stopped (Ctrl-C or SIGTERM raise KeyboardInterrupt there:
harness/processes/stop_signals.py), and reads the last result back with the same model (`Ended`). Where there is
no result, `Ended.reason()` says why in one line.

A mode's child (runner.py, child.py) and each kernel-bench process (kernel_bench/process.py) go through here; a
cold-start check in a new interpreter uses the same `Child` (cold_start.py).
"""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Generic, Iterator, Mapping, Optional, TypeVar

from pydantic import BaseModel, ValidationError

from adaln_bench.datamodel.io import write_text_atomic

LOG_TAIL_CHARS = 4000
CAUSE_CHARS = 300


class ProtocolSpec(BaseModel):
    """What every child's spec holds besides its own fields: where the child writes its result (set by `launch`)."""

    result_path: str = ""


S = TypeVar("S", bound=ProtocolSpec)
R = TypeVar("R", bound=BaseModel)


@dataclass(frozen=True)
class ChildFiles:
    """One child's files: its spec, its result, its log (stderr, and stdout unless the parent reads it)."""

    spec: Path
    result: Path
    log: Path

    @classmethod
    def named(cls, folder: Path, name: str, log: Optional[Path] = None) -> "ChildFiles":
        return cls(folder / f"{name}.spec.json", folder / f"{name}.result.json", log or folder / f"{name}.stderr.log")


def child_command(module: str, spec_path: Path | str, python: Optional[str] = None) -> list[str]:
    """The command line of a fresh child: `python -m MODULE SPEC.json`."""
    return [python or sys.executable, "-m", module, str(spec_path)]


@dataclass(frozen=True)
class Exit:
    code: Optional[int]  # negative: the signal that ended it
    timed_out: bool
    wall_s: float


class Child:
    """One running child. `stop()` ends it (with every process of its session when it has one of its own)."""

    def __init__(self, argv: list[str], log: Path, *, out: Optional[Path] = None,
                 env: Optional[Mapping[str, str]] = None, read_stdout: bool = False, new_session: bool = True):
        self._log = open(log, "wb")
        self._out = open(out, "wb") if out is not None else None
        stdout = subprocess.PIPE if read_stdout else (self._out or self._log)
        stderr = self._log if (read_stdout or self._out) else subprocess.STDOUT
        self._new_session = new_session
        self.started = time.monotonic()
        try:
            self.proc = subprocess.Popen(argv, env=dict(env) if env is not None else None, stdout=stdout,
                                         stderr=stderr, stdin=subprocess.DEVNULL, start_new_session=new_session,
                                         text=True, bufsize=1)
        except BaseException:
            self.close()
            raise

    def lines(self) -> Iterator[str]:
        """The child's stdout, line by line (only with `read_stdout`)."""
        assert self.proc.stdout is not None
        return iter(self.proc.stdout)

    def stop(self) -> None:
        if self.proc.poll() is None:
            try:
                if self._new_session:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                else:
                    self.proc.kill()
            except ProcessLookupError:
                pass
        self.proc.wait()

    def wait(self, timeout_s: Optional[float]) -> Exit:
        """Its end, killed at the timeout; an exception here (KeyboardInterrupt from a stop signal) stops it
        first."""
        timed_out = False
        try:
            self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
            self.stop()
        except BaseException:
            self.stop()
            raise
        return Exit(self.proc.returncode, timed_out, round(time.monotonic() - self.started, 3))

    def close(self) -> None:
        self._log.close()
        if self._out is not None:
            self._out.close()


def write_spec(spec: ProtocolSpec, spec_path: Path, result_path: Path) -> None:
    """`spec`, naming `result_path` as its result file, written where the child will read it."""
    spec = spec.model_copy(update={"result_path": str(result_path)})
    spec_path.write_text(spec.model_dump_json(), encoding="utf-8")


def launch(module: str, spec: ProtocolSpec, files: ChildFiles, *, env: Optional[Mapping[str, str]] = None,
           python: Optional[str] = None, read_stdout: bool = False) -> Child:
    """Write `spec` (naming `files.result`) and start its child in a session of its own."""
    write_spec(spec, files.spec, files.result)
    return Child(child_command(module, files.spec, python), files.log, env=env, read_stdout=read_stdout)


def read_result(path: Path, model: type[R]) -> tuple[Optional[R], Optional[str]]:
    """The child's result, validated; else None and why, in one line."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None, "no result file"
    except OSError as exc:
        return None, f"result file unreadable: {exc.strerror or exc}"
    try:
        return model.model_validate_json(text), None
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "the document"
        return None, f"malformed result file: {where}: {first['msg']}"


def log_tail(path: Path, chars: int = LOG_TAIL_CHARS) -> str:
    try:
        data = path.read_bytes()[-chars:]
    except OSError:
        return ""
    return data.decode("utf-8", "replace")


@dataclass(frozen=True)
class Ended(Generic[R]):
    """A child's end: how it exited, its result (None: `problem` says why) and the tail of its log."""

    exit: Exit
    timeout_s: Optional[float]
    result: Optional[R]
    problem: Optional[str]
    tail: str

    @property
    def code(self) -> Optional[int]:
        return self.exit.code

    def reason(self) -> Optional[str]:
        """Why there is no result, in one line; None when it exited 0 with a valid result."""
        if self.exit.timed_out:
            return f"no result within {self.timeout_s:g} s"
        code = self.exit.code
        if code != 0:
            # An uncaught exception ends a child's log with its one line; a child killed by a signal wrote none.
            cause = last_error_line(self.tail) if code is not None and code > 0 else None
            return describe_exit(code) + (f": {cause}" if cause else "")
        return None if self.result is not None else f"exited without a result: {self.problem}"


def finish(child: Child, files: ChildFiles, model: type[R], timeout_s: Optional[float],
           after_exit: Callable[[], None] = lambda: None) -> Ended[R]:
    """Wait for `child` (see `Child.wait`), then read its result and log; `after_exit` runs once it has ended
    (a reader of its stdout joined, say), before its log is closed."""
    try:
        ended = child.wait(timeout_s)
    finally:
        try:
            after_exit()
        finally:
            child.close()
    result, problem = read_result(files.result, model)
    return Ended(ended, timeout_s, result, problem, log_tail(files.log))


# --- the child's side ---------------------------------------------------------------------------------------


def child_main(argv: list[str], module: str, spec_model: type[S],
               body: Callable[[S, Callable[[BaseModel], None]], object]) -> int:
    """`python -m MODULE SPEC.json`: the spec validated, then `body(spec, publish)`; `publish(result)` writes
    the result atomically to the spec's result file (fields never set are left out). Bad input: one line, 2."""
    if len(argv) != 1:
        print(f"usage: python -m {module} SPEC.json", file=sys.stderr)
        return 2
    try:
        spec = spec_model.model_validate_json(Path(argv[0]).read_text(encoding="utf-8"))
    except (OSError, ValidationError, ValueError) as exc:
        print(f"{module}: cannot read the spec {argv[0]}: {str(exc).splitlines()[0]}", file=sys.stderr)
        return 2

    def publish(result: BaseModel) -> None:
        write_text_atomic(result.model_dump_json(exclude_unset=True, indent=1), spec.result_path)

    body(spec, publish)
    return 0


# --- one line for an end without a result ---------------------------------------------------------------------

_ERROR_LINE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt)(: .*)?$")


def last_error_line(tail: str) -> Optional[str]:
    """The last `SomeError: message` line of a child's log (what a Python traceback ends with), shortened."""
    for line in reversed(tail.splitlines()):
        line = line.strip()
        if _ERROR_LINE.match(line):
            return line if len(line) <= CAUSE_CHARS else line[: CAUSE_CHARS - 1] + "…"
    return None


def describe_exit(code: Optional[int]) -> str:
    if code is None:
        return "did not exit"
    if code < 0:
        try:
            name = signal.Signals(-code).name
            # Outside a timeout (reported as such), a SIGKILL is most often the kernel's out-of-memory killer.
            return f"killed by signal {name}" + (" (out of memory?)" if name == "SIGKILL" else "")
        except ValueError:
            return f"killed by signal {-code}"
    return f"exited with code {code}"
