"""The envs file (TOML): which interpreter runs which mode, and the pins each framework's environment is built with.

```toml
[python]              # mode = interpreter; a relative path is taken from this file's folder
vllm = "vllm/bin/python"
sglang = "sglang/bin/python"

[pins]                # framework = requirements added to its environment by `adaln-bench envs create`
vllm = ["vllm==0.33.0"]
megatron = ["megatron-core==0.16.0", "transformer-engine==2.20.2"]
```
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Optional

from adaln_bench.errors import UserError
from adaln_bench.harness.processes.interpreters import resolve_interpreter
from adaln_bench.datamodel.io import write_text_atomic
from adaln_bench.toml_file import read_toml

TABLES = ("python", "pins")


@dataclass
class EnvsFile:
    python: dict[str, str] = field(default_factory=dict)  # mode -> absolute interpreter path
    pins: dict[str, list[str]] = field(default_factory=dict)  # framework -> requirements


def read_envs_file(path: Path) -> EnvsFile:
    data = read_toml(path, "envs file")
    unknown = [k for k in data if k not in TABLES]
    if unknown:
        raise UserError(f"{path}: unknown table [{unknown[0]}]; an envs file has [python] and [pins]")
    base = Path(os.path.abspath(path)).parent
    out = EnvsFile()
    python = data.get("python", {})
    if not isinstance(python, dict):
        raise UserError(f"{path}: [python] must be a table of mode = \"interpreter\"")
    for mode, interpreter in python.items():
        if not isinstance(interpreter, str) or not interpreter:
            raise UserError(f"{path}: [python] {mode} must be an interpreter path (a string)")
        out.python[mode] = resolve_interpreter(interpreter, base)
    pins = data.get("pins", {})
    if not isinstance(pins, dict):
        raise UserError(f"{path}: [pins] must be a table of framework = [\"requirement\", …]")
    for framework, reqs in pins.items():
        if isinstance(reqs, str):
            reqs = [reqs]
        if not isinstance(reqs, list) or not all(isinstance(r, str) and r for r in reqs):
            raise UserError(f"{path}: [pins] {framework} must be a list of requirement strings")
        out.pins[framework] = list(reqs)
    return out


def _toml_string(text: str) -> str:
    # A JSON string is a valid TOML basic string (the same escapes, \uXXXX included).
    return json.dumps(text, ensure_ascii=True)


def _shown_path(interpreter: str, base: Path) -> str:
    """Relative to the file's folder when the interpreter lies under it, so the folder can move as one."""
    try:
        return Path(interpreter).relative_to(base).as_posix()
    except ValueError:
        return interpreter


def envs_file_text(envs: EnvsFile, base: Path, header: Iterable[str] = ()) -> str:
    lines = [f"# {line}" for line in header]
    lines += ["[python]"]
    lines += [f"{mode} = {_toml_string(_shown_path(p, base))}" for mode, p in envs.python.items()]
    lines += ["", "[pins]"]
    lines += [f"{fw} = [{', '.join(_toml_string(r) for r in reqs)}]" for fw, reqs in envs.pins.items()]
    return "\n".join(lines) + "\n"


def write_envs_file(path: Path, envs: EnvsFile, header: Iterable[str] = ()) -> Path:
    base = Path(os.path.abspath(path)).parent
    return write_text_atomic(envs_file_text(envs, base, header), path)


def parse_python_options(values: Iterable[str]) -> dict[str, str]:
    """`--python MODE=INTERPRETER`, repeatable: mode -> absolute interpreter path."""
    out: dict[str, str] = {}
    for value in values:
        mode, sep, interpreter = value.partition("=")
        if not sep or not mode.strip() or not interpreter.strip():
            raise UserError(f"--python takes MODE=INTERPRETER (e.g. vllm=envs/vllm/bin/python), not {value!r}")
        out[mode.strip()] = resolve_interpreter(interpreter.strip())
    return out


def choose_interpreters(python: list[str], envs_file: Optional[Path], modes, modes_file: Optional[str]) -> dict[str, str]:
    """Mode -> interpreter for the chosen modes that run under another one: the envs file's [python]
    table, overridden by `--python`. Names that are no mode are the user's mistake."""
    from adaln_bench.harness.processes.interpreters import is_this_interpreter
    from adaln_bench.modes.registry import all_modes

    table: dict[str, str] = {}
    if envs_file is not None:
        table.update(read_envs_file(envs_file).python)
    typed = parse_python_options(python)
    table.update(typed)
    known = set(all_modes(modes_file))
    unknown = [name for name in table if name not in known]
    if unknown:
        raise UserError(f"--python/--envs-file: unknown mode {unknown[0]!r}; known modes: {', '.join(sorted(known))}")
    chosen = {m.name for m in modes}
    # An interpreter typed on the command line that is not there is a typo: bad input. One in an envs file
    # may name an environment not built on this machine yet: that mode is unavailable with the reason.
    for name, path in typed.items():
        if name in chosen:
            if not os.path.exists(path):
                raise UserError(f"--python {name}={path}: no such file")
            if not os.path.isfile(path) or not os.access(path, os.X_OK):
                raise UserError(f"--python {name}={path}: not an executable file")
    return {name: path for name, path in table.items() if name in chosen and not is_this_interpreter(path)}
