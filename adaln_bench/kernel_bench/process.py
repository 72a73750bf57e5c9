"""What the `kernel-bench` command and its child processes say to each other: the spec the parent writes (typed,
validated by the child), the result the child writes, and the parent's loop that runs the children one after
the other.

Each child is a fresh process (`python -m adaln_bench.kernel_bench.child SPEC.json RESULT.json`), so that every
figure is a median over processes; its log goes to `kernel_bench.proc<i>.log` in the output folder.
"""
from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field

from adaln_bench.datamodel.io import write_text_atomic

CHILD = "adaln_bench.kernel_bench.child"
MIN_LEFT_S = 10.0  # a process that would start with less time than this is skipped


class ProcessSpec(BaseModel):
    """One child's work: the operators, the subjects beside each stock path, the sizes, and which parts."""

    model_config = ConfigDict(extra="forbid")

    shape: str
    ops: list[str]
    candidates: list[str] = Field(default_factory=list)  # registered candidates, by name
    libraries: list[str] = Field(default_factory=list)  # bundled projection libraries (subjects.parse_library)
    sizes: dict[str, list[int]]
    timing: bool = True
    bits: bool = False
    entries: bool = False
    bits_sizes: dict[str, list[int]] = Field(default_factory=dict)  # default: `sizes`
    accuracy_sizes: dict[str, list[int]] = Field(default_factory=dict)  # default: `sizes`
    rule: Literal["default", "fine"] = "default"


def log(*parts: object) -> None:
    print(" ".join(str(p) for p in parts), file=sys.stderr, flush=True)


def child_main(measure: Callable[[dict], dict], argv: list[str]) -> int:
    """``SPEC.json OUT.json``: the measurement of the validated spec, with its wall time, written to OUT."""
    spec = ProcessSpec.model_validate_json(Path(argv[0]).read_text(encoding="utf-8"))
    started = time.monotonic()
    result = measure(spec.model_dump())
    result["wall_s"] = round(time.monotonic() - started, 1)
    write_text_atomic(json.dumps(result, indent=1), argv[1])
    return 0


def run_process(spec_path: Path, index: int, out: Path, timeout_s: float) -> tuple[Optional[dict], str]:
    """One fresh child process: its result, or why there is none."""
    result_path = out / f".kernel_bench.proc{index}.json"
    log_path = out / f"kernel_bench.proc{index}.log"
    cmd = [sys.executable, "-m", CHILD, str(spec_path), str(result_path)]
    with open(log_path, "w") as child_log:
        try:
            rc = subprocess.run(cmd, stdout=child_log, stderr=subprocess.STDOUT, timeout=timeout_s).returncode
        except subprocess.TimeoutExpired:
            return None, f"process {index}: timed out after {timeout_s:.0f} s (log: {log_path})"
    if rc != 0 or not result_path.exists():
        return None, f"process {index}: exit status {rc} (log: {log_path})"
    data = json.loads(result_path.read_text())
    result_path.unlink()
    return data, ""


def run_processes(spec_of: Callable[[int], ProcessSpec], processes: int, out: Path, timeout_s: float,
                  budget_s: Optional[float] = None,
                  echo: Callable[[str], None] = lambda line: log(f"kernel-bench: {line}")) -> tuple[list[dict], list[str]]:
    """`processes` fresh children, one after the other (spec_of(i) is the i-th one's spec): their results and
    why any gave none. With `budget_s`, no process runs past that many seconds from now, so that a caller's own
    time limit still finds the output written."""
    runs, errors = [], []
    deadline = None if budget_s is None else time.monotonic() + budget_s
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(processes):
            left = timeout_s if deadline is None else min(timeout_s, deadline - time.monotonic())
            if left < MIN_LEFT_S:
                errors.append(f"process {i}: skipped, {budget_s:.0f} s budget spent")
                echo(errors[-1])
                continue
            path = Path(tmp) / f"spec{i}.json"
            path.write_text(spec_of(i).model_dump_json())
            echo(f"process {i + 1} of {processes} ...")
            data, err = run_process(path, i, out, left)
            if data is None:
                errors.append(err)
                echo(err)
            else:
                runs.append(data)
    return runs, errors
