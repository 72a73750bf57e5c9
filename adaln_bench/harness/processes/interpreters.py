"""Running a mode under another Python interpreter: the preflight check that it runs the same adaln_bench.

A mode's child may run under the interpreter of another environment (`--python MODE=PATH`), one whose
torch and framework differ from the parent's. What must not differ is this tool: the parent and the child
exchange a spec and a result file whose schema is the package's, and the report is only honest if every
mode was measured by the same harness code. A package installed from outside git has no commit, so the
check compares the version and a SHA-256 of the package's source files.

The check runs the interpreter once, with the environment and working directory the child will have, so
that it sees the same `sys.path` (PYTHONPATH, the working directory that `-m` puts first, .pth files).
"""
from __future__ import annotations

import inspect
import json
import os
import shutil
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Optional

PROBE_TIMEOUT_S = 120

# The suffixes that make up the package's source: Python and the bundled kernel's C++/CUDA files.
SOURCE_SUFFIXES = (".py", ".cu", ".cuh", ".h")


def package_source_sha256(package_dir: str) -> str:
    """SHA-256 over the package's source files, each as its relative path and its bytes, in path order.

    Self-contained (only the standard library, no annotations needing newer Pythons): its source is sent
    to the other interpreter and run there, so both sides hash the same way.
    """
    import hashlib
    import os

    suffixes = (".py", ".cu", ".cuh", ".h")
    files = []
    for root, dirs, names in os.walk(package_dir):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__" and not d.startswith("."))
        for name in names:
            if name.endswith(suffixes):
                full = os.path.join(root, name)
                files.append((os.path.relpath(full, package_dir).replace(os.sep, "/"), full))
    digest = hashlib.sha256()
    for rel, full in sorted(files):
        with open(full, "rb") as fh:
            data = fh.read()
        digest.update(rel.encode("utf-8") + b"\0" + str(len(data)).encode("ascii") + b"\0" + data)
    return digest.hexdigest()


_PROBE_MAIN = """
import json, os, platform, sys
facts = {"executable": sys.executable, "python": platform.python_version()}
try:
    import adaln_bench
except BaseException as exc:
    facts["error"] = "%s: %s" % (type(exc).__name__, exc)
else:
    package = os.path.dirname(os.path.abspath(adaln_bench.__file__))
    facts.update(version=getattr(adaln_bench, "__version__", None), package=package,
                 source_sha256=package_source_sha256(package))
    for dependency in DEPENDENCIES:
        try:
            __import__(dependency)
        except BaseException as exc:
            facts["dependency_error"] = "%s: %s" % (type(exc).__name__, exc)
            break
print("@@adaln-bench-identity " + json.dumps(facts))
"""

# The child's core imports: an environment that finds adaln_bench (on PYTHONPATH, say) but not these
# would crash at the child's first line; said here, it is one clear reason instead.
DEPENDENCIES = ("pydantic", "typer", "rich", "torch")

PROBE = (f"DEPENDENCIES = {DEPENDENCIES!r}\n" + inspect.getsource(package_source_sha256) + _PROBE_MAIN)
_MARK = "@@adaln-bench-identity "


@dataclass(frozen=True)
class Identity:
    """Which adaln_bench an interpreter imports."""

    version: Optional[str]
    package: str
    source_sha256: str


def this_identity() -> Identity:
    """The adaln_bench this process runs."""
    import adaln_bench

    package = os.path.dirname(os.path.abspath(adaln_bench.__file__))
    return Identity(adaln_bench.__version__, package, package_source_sha256(package))


def resolve_interpreter(text: str, base: Optional[Path] = None) -> str:
    """An absolute path for an interpreter named on the command line or in a file.

    A bare name (python3.12) is looked up on PATH; a relative path is taken from `base` (the envs file's
    folder) or the working directory. Symbolic links are kept: a venv's bin/python is a link to the base
    interpreter, and only the link's path selects the venv.
    """
    expanded = os.path.expanduser(text)
    if os.sep not in expanded and (os.altsep is None or os.altsep not in expanded):
        found = shutil.which(expanded)
        if found:
            return os.path.abspath(found)
    path = Path(expanded)
    if not path.is_absolute():
        path = (base or Path.cwd()) / path
    return os.path.abspath(path)


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else ""


def check_interpreter(python: str, env: Mapping[str, str], expected: Identity,
                      cwd: Optional[str] = None) -> Optional[str]:
    """None when `python` runs and imports the same adaln_bench as this process; else one line saying why."""
    if not os.path.exists(python):
        return f"interpreter {python}: no such file"
    if os.path.isdir(python) or not os.access(python, os.X_OK):
        return f"interpreter {python}: not an executable file"
    try:
        proc = subprocess.run([python, "-c", PROBE], env=dict(env), cwd=cwd, capture_output=True, text=True,
                              timeout=PROBE_TIMEOUT_S, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return f"interpreter {python}: did not answer within {PROBE_TIMEOUT_S} s"
    except OSError as exc:
        return f"interpreter {python}: cannot start: {exc.strerror or exc}"
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith(_MARK)), None)
    if line is None:
        why = _last_line(proc.stderr) or f"exit code {proc.returncode}"
        return f"interpreter {python}: the identity check failed: {why}"
    facts = json.loads(line[len(_MARK):])
    if "error" in facts:
        return f"interpreter {python}: does not import adaln_bench ({facts['error']})"
    if facts.get("version") != expected.version:
        return (f"interpreter {python}: imports adaln_bench {facts.get('version')} from {facts.get('package')}, "
                f"not this run's {expected.version}")
    if facts.get("source_sha256") != expected.source_sha256:
        return (f"interpreter {python}: imports a different adaln_bench source from {facts.get('package')} "
                f"(source sha256 {str(facts.get('source_sha256'))[:12]}, this run's {expected.source_sha256[:12]} "
                f"from {expected.package})")
    if "dependency_error" in facts:
        return f"interpreter {python}: imports adaln_bench but not its dependencies ({facts['dependency_error']})"
    return None


class InterpreterChecks:
    """The preflight checks of one run, each interpreter checked once for a given sys.path-deciding setup."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._done: dict[tuple, Optional[str]] = {}
        self._identity: Optional[Identity] = None

    def check(self, python: str, env: Mapping[str, str]) -> Optional[str]:
        key = (python, env.get("PYTHONPATH"), env.get("PYTHONHOME"), env.get("PYTHONNOUSERSITE"), os.getcwd())
        with self._lock:
            if self._identity is None:
                self._identity = this_identity()
            if key not in self._done:
                self._done[key] = check_interpreter(python, env, self._identity)
            return self._done[key]


def is_this_interpreter(python: Optional[str]) -> bool:
    return python is None or os.path.abspath(python) == os.path.abspath(sys.executable)
