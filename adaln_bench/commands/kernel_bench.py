"""`adaln-bench kernel-bench`: the bundled kernel's code paths against the plain cuBLAS path, in device time.

In each of --processes fresh processes (adaln_bench/kernel_bench/child.py) every subject is timed at every
T, forward and forward + backward, by CUDA-graph replay; the table gives the median over processes, the
ratio to cuBLAS, TB/s, TFLOP/s and the fraction of the floor (kernel_bench/floors.py). The first process
also checks bits (kernel_bench/bits.py) and accuracy. Writes kernel_bench.<commit>.json and .md into --out.
"""
from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, List, Optional

import typer

from adaln_bench.errors import UserError

DEFAULT_SIZES = "1,3,4,64,256,2048"


def parse_sizes(text: str, what: str) -> list[int]:
    try:
        sizes = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise UserError(f"{what} takes token counts like 1,64,2048, not {text!r}") from None
    if not sizes or min(sizes) < 1:
        raise UserError(f"{what} takes positive token counts, not {text!r}")
    return sizes


def run_process(config_path: Path, index: int, out: Path, timeout_s: float,
                child: str = "adaln_bench.kernel_bench.child") -> tuple[Optional[dict], str]:
    """One fresh child process (`python -m CHILD CONFIG RESULT`): its result, or why there is none."""
    result_path = out / f".kernel_bench.proc{index}.json"
    log_path = out / f"kernel_bench.proc{index}.log"
    cmd = [sys.executable, "-m", child, str(config_path), str(result_path)]
    with open(log_path, "w") as log:
        try:
            rc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, timeout=timeout_s).returncode
        except subprocess.TimeoutExpired:
            return None, f"process {index}: timed out after {timeout_s:.0f} s (log: {log_path})"
    if rc != 0 or not result_path.exists():
        return None, f"process {index}: exit status {rc} (log: {log_path})"
    data = json.loads(result_path.read_text())
    result_path.unlink()
    return data, ""


def run_processes(config_of: Callable[[int], dict], processes: int, out: Path, timeout_s: float,
                  child: str = "adaln_bench.kernel_bench.child",
                  budget_s: Optional[float] = None) -> tuple[list[dict], list[str]]:
    """`processes` fresh children, one after the other (config_of(i) is the i-th one's config): their results
    and why any gave none. With `budget_s`, no process runs past that many seconds from now (one that would
    start with less than 10 s left is skipped), so that a caller's own time limit still finds the document
    written. Exit 1 when none gave a result."""
    runs, errors = [], []
    deadline = None if budget_s is None else time.monotonic() + budget_s
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(processes):
            left = timeout_s if deadline is None else min(timeout_s, deadline - time.monotonic())
            if left < 10:
                errors.append(f"process {i}: skipped, {budget_s:.0f} s budget spent")
                typer.echo(f"kernel-bench: {errors[-1]}", err=True)
                continue
            path = Path(tmp) / f"config{i}.json"
            path.write_text(json.dumps(config_of(i)))
            typer.echo(f"kernel-bench: process {i + 1} of {processes} ...", err=True)
            data, err = run_process(path, i, out, left, child)
            if data is None:
                errors.append(err)
                typer.echo(f"kernel-bench: {err}", err=True)
            else:
                runs.append(data)
    if not runs:
        raise typer.Exit(1)
    return runs, errors


def run_header(commit: Optional[str], dirty: Optional[bool]) -> dict:
    """The tool and device a run's document records (CUDA is there: the command checked)."""
    import torch

    major, minor = torch.cuda.get_device_capability(0)
    return {"tool": {"commit": commit, "dirty": dirty, "torch": torch.__version__, "cuda": torch.version.cuda},
            "device": {"name": torch.cuda.get_device_name(0), "capability": f"{major}.{minor}"}}


def kernel_bench_command(
    library: Optional[List[str]] = typer.Option(
        None, "--library", "-l", metavar="LIBRARY",
        help="A bundled library: sm90, portable, or NAME=PATH:DEFINE,DEFINE (an sm90_config.h variant). "
             "Repeatable; default: every code path this GPU can run."),
    op: Optional[List[str]] = typer.Option(
        None, "--op", metavar="OP", help="An operator to time against its stock path instead of the projection's libraries against "
        "cuBLAS (repeatable; 'all': every operator with a bundled candidate). See --candidate."),
    candidate: Optional[List[str]] = typer.Option(
        None, "--candidate", "-c", metavar="NAME", help="With --op: the candidates timed beside the stock path (default: bundled)."),
    sizes: Optional[str] = typer.Option(None, help="Token counts, comma-separated (default: 1,3,4,64,256,2048; "
                                        "with --op, 4097,32768,131072 for the token operators)."),
    processes: int = typer.Option(3, min=1, help="Fresh processes; each figure is the median over them."),
    entries: bool = typer.Option(True, help="Also time each C entry point alone (forward, d_temb, dW, db)."),
    bits: bool = typer.Option(True, help="Check invariance and bits across libraries (first process)."),
    accuracy_sizes: str = typer.Option("64,2048", help="T at which errors against FP64 are measured."),
    shape: str = typer.Option("h3", help="Shape preset."),
    out: Path = typer.Option(Path("kernel-bench-out"), help="Directory for the JSON, Markdown and logs."),
    name: Optional[str] = typer.Option(None, help="File stem (default kernel_bench.<commit>)."),
    process_timeout: float = typer.Option(540.0, help="Seconds one process may take."),
    budget: Optional[float] = typer.Option(None, help="Seconds all processes together may take (a process "
                                           "that would run past it is cut short or skipped); with --op only."),
) -> None:
    """Time the bundled kernel against cuBLAS at each T in device time (needs a CUDA GPU); with --op, an
    operator's candidates against its stock path.

    Exit 0 when every process ran and every library kept its bits across batch sizes; 1 when a library
    was not invariant or a subject or process failed; 2 for bad input or no GPU.
    """
    from adaln_bench.harness.measurement.environment import tool_git_state
    from adaln_bench.harness.assembly.shapes import PRESETS
    from adaln_bench.kernel_bench.subjects import SpecError, parse_library
    from adaln_bench.kernel_bench.table import combine, document_markdown, not_invariant
    from adaln_bench.datamodel.io import write_text_atomic

    if op:
        from adaln_bench.commands.kernel_bench_ops import ops_command

        ops_command(op, candidate or ["bundled"], sizes, processes, bits, shape, out, name, process_timeout, budget)
        return
    if candidate or budget is not None:
        raise UserError("--candidate and --budget go with --op")
    size_list = parse_sizes(sizes or DEFAULT_SIZES, "--sizes")
    acc_list = parse_sizes(accuracy_sizes, "--accuracy-sizes") if accuracy_sizes else []
    if shape not in PRESETS:
        raise UserError(f"--shape {shape!r}: known presets are {', '.join(PRESETS)}")
    try:
        specs = [parse_library(x) for x in library or []]
    except SpecError as exc:
        raise UserError(str(exc)) from None
    if len({s.name for s in specs}) != len(specs):
        raise UserError("--library: two libraries have the same name")
    missing = [s.file for s in specs if s.file and not Path(s.file).is_file()]
    if missing:  # before any process starts: each would fail on it
        raise UserError(f"--library: no such library file: {missing[0]}")
    import torch

    if not torch.cuda.is_available():
        raise UserError("kernel-bench times CUDA kernels: no CUDA GPU is visible here")
    major, minor = torch.cuda.get_device_capability(0)
    libraries = list(library or (["sm90", "portable"] if (major, minor) == (9, 0) else ["portable"]))
    commit, dirty = tool_git_state()
    stem = name or f"kernel_bench.{(commit or 'nocommit')[:7]}{'-dirty' if dirty else ''}"
    out.mkdir(parents=True, exist_ok=True)
    config = {"shape": shape, "sizes": size_list, "libraries": libraries, "entries": entries}
    runs, errors = run_processes(
        lambda i: dict(config, bits=bits and i == 0, accuracy_sizes=acc_list if i == 0 else []), processes, out,
        process_timeout)
    combined = combine(runs, PRESETS[shape])
    first = runs[0]
    doc = {
        **run_header(commit, dirty), "shape": shape, "processes": len(runs), "process_errors": errors,
        "subjects": first.get("subjects", {}), "combined": combined,
        "subject_errors": sorted({k: v for r in runs for k, v in r.get("errors", {}).items()}.items()),
        "bits": first.get("bits"), "accuracy": first.get("accuracy"),
        "per_process": [{k: r.get(k) for k in ("times", "entries", "wall_s")} for r in runs],
    }
    text = document_markdown(stem, doc, runs)
    write_text_atomic(json.dumps(doc, indent=1) + "\n", out / f"{stem}.json")
    write_text_atomic(text, out / f"{stem}.md")
    typer.echo(text)
    failed = bool(errors or doc["subject_errors"] or not_invariant(doc))
    raise typer.Exit(1 if failed else 0)
