"""`kernel-bench`'s processes: the spec each child gets and the result it writes, as typed models, and the parent's
loop that runs them one after the other through the one child protocol (harness/processes/launcher.py).

Each child is a fresh process (`python -m adaln_bench.kernel_bench.child SPEC.json`), so that every figure is a
median over processes; its log goes to `kernel_bench.proc<i>.log` in the output folder. Ctrl-C or SIGTERM stop
the running child; the processes that finished are kept.
"""
from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field

from adaln_bench.harness.processes.launcher import ChildFiles, ProtocolSpec, finish, launch

CHILD = "adaln_bench.kernel_bench.child"
MIN_LEFT_S = 10.0  # a process that would start with less time than this is skipped


class ProcessSpec(ProtocolSpec):
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


class ProcessResult(BaseModel):
    """What one child measured (child.py), as the output keeps it in `per_process`: per operator its figures, the
    subjects that failed and why, and the process's wall time."""

    # A figure that is not a number stays one in the file (as in the output), not null.
    model_config = ConfigDict(extra="forbid", ser_json_inf_nan="constants")

    ops: dict[str, dict]
    errors: dict[str, str]
    wall_s: Optional[float] = None


def log(*parts: object) -> None:
    print(" ".join(str(p) for p in parts), file=sys.stderr, flush=True)


def run_processes(spec_of: Callable[[int], ProcessSpec], processes: int, out: Path, timeout_s: float,
                  budget_s: Optional[float] = None,
                  echo: Callable[[str], None] = lambda line: log(f"kernel-bench: {line}"),
                  stop_cause: Optional[Callable[[], str]] = None) -> tuple[list[dict], list[str]]:
    """`processes` fresh children, one after the other (spec_of(i) is the i-th one's spec): their results and
    why any gave none. With `budget_s`, no process runs past that many seconds from now, so that a caller's own
    time limit still finds the output written. With `stop_cause`, a KeyboardInterrupt (the caller's stop signal)
    stops the running child and starts no other, and what finished is returned; `stop_cause()` words why."""
    runs: list[dict] = []
    errors: list[str] = []
    deadline = None if budget_s is None else time.monotonic() + budget_s
    with tempfile.TemporaryDirectory() as tmp:
        i = 0  # the process running or about to run when a stop signal comes
        try:
            for i in range(processes):
                left = timeout_s if deadline is None else min(timeout_s, deadline - time.monotonic())
                if left < MIN_LEFT_S:
                    errors.append(f"process {i}: skipped, {budget_s:.0f} s budget spent")
                    echo(errors[-1])
                    continue
                files = ChildFiles.named(Path(tmp), f"proc{i}", log=out / f"kernel_bench.proc{i}.log")
                echo(f"process {i + 1} of {processes} ...")
                ended = finish(launch(CHILD, spec_of(i), files), files, ProcessResult, left)
                if ended.result is None or ended.code != 0:
                    errors.append(f"process {i}: {ended.reason()} (log: {files.log})")
                    echo(errors[-1])
                else:
                    runs.append(ended.result.model_dump())
                i += 1
        except KeyboardInterrupt:
            if stop_cause is None:
                raise
            errors.append(f"process {i}: {stop_cause()}; the later processes were not started")
            echo(errors[-1])
    return runs, errors
