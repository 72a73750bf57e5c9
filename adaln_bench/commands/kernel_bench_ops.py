"""`adaln-bench kernel-bench --op`: an operator's candidates against its stock path in device time.

In each of --processes fresh processes (adaln_bench/kernel_bench/op_child.py) every operator's stock path,
candidates and a copy of its fewest bytes are timed at every size, forward and forward + backward; one more
process after them checks bits across sizes and errors against FP64. The document (kernel_bench/op_table.py) gives
the medians over processes, the paired ratios, the fractions of the copy rate and issue 32's verdicts. Writes
<stem>.json and <stem>.md into --out.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from adaln_bench.commands.kernel_bench import parse_sizes, run_header, run_processes
from adaln_bench.errors import UserError
from adaln_bench.kernel_bench.targets import MLP_OP

TOKEN_SIZES = "4097,32768,131072"
TIMESTEP_SIZES = "1,3,4,64,256,2048"
ALL = "all"


def resolve_ops(names: list[str], candidates: list[str]) -> list[str]:
    """The operators named (ALL: every one with a candidate of the first name), each known and with every
    candidate named."""
    from adaln_bench.ops.candidates import candidates_of
    from adaln_bench.ops.registry import all_operators, get_operator

    if ALL in names:
        names = [n for n in all_operators() if candidates[0] in candidates_of(n)]
    out = []
    for name in dict.fromkeys(names):
        get_operator(name)  # a UserError naming the known operators
        missing = [c for c in candidates if c not in candidates_of(name)]
        if missing:
            raise UserError(f"--candidate {missing[0]!r}: {name} has no such candidate; it has "
                            f"{', '.join(candidates_of(name))}")
        out.append(name)
    return out


def default_sizes(op: str) -> str:
    """The token operators' S = 4097, 32768, 131072; the timestep operators' (the projection's) T sizes."""
    from adaln_bench.ops.registry import get_operator

    return TOKEN_SIZES if get_operator(op).family.size_symbol == "S" else TIMESTEP_SIZES


def mlp_floors(shape, sizes: list[int]) -> dict:
    """The timestep MLP's floor at each T, forward and forward + backward (kernel_bench.floors.mlp_work)."""
    from dataclasses import asdict

    from adaln_bench.kernel_bench.floors import mlp_work

    return {str(t): {k: asdict(mlp_work(shape, t, k)) for k in ("fwd", "fwd_bwd")} for t in sizes}


def ops_command(op: list[str], candidates: list[str], sizes: Optional[str], processes: int, bits: bool, shape: str,
                out: Path, name: Optional[str], process_timeout: float, budget: Optional[float] = None) -> None:
    from adaln_bench.harness.measurement.environment import tool_git_state
    from adaln_bench.harness.assembly.shapes import PRESETS
    from adaln_bench.kernel_bench.op_table import combine, document_markdown, failed_bits
    from adaln_bench.ops.registry import get_operator
    from adaln_bench.datamodel.io import write_text_atomic

    if shape not in PRESETS:
        raise UserError(f"--shape {shape!r}: known presets are {', '.join(PRESETS)}")
    if "stock" in candidates or "copy" in candidates:
        raise UserError("--candidate: 'stock' and 'copy' are the names of the stock path and of the copy")
    ops = resolve_ops(op, list(dict.fromkeys(candidates)))
    if not ops:
        raise UserError(f"--op {ALL}: no operator has a candidate named {candidates[0]!r}")
    size_lists = {n: parse_sizes(sizes or default_sizes(n), "--sizes") for n in ops}
    import torch

    if not torch.cuda.is_available():
        raise UserError("kernel-bench times CUDA kernels: no CUDA GPU is visible here")
    commit, dirty = tool_git_state()
    stem = name or f"kernel_bench.ops.{(commit or 'nocommit')[:7]}{'-dirty' if dirty else ''}"
    out.mkdir(parents=True, exist_ok=True)
    config = {"shape": shape, "ops": ops, "candidates": list(dict.fromkeys(candidates)), "sizes": size_lists}
    # the timed processes, then (so that a slow check cannot cost the times) one that checks bits and errors
    runs, errors = run_processes(lambda i: dict(config, timing=i < processes, bits=i == processes),
                                 processes + (1 if bits else 0), out, process_timeout,
                                 child="adaln_bench.kernel_bench.op_child", budget_s=budget)
    table_grads = {n: get_operator(n).table_grads for n in ops}
    floors = {n: mlp_floors(PRESETS[shape], size_lists[n]) for n in ops if n == MLP_OP}
    doc = {**run_header(commit, dirty), "shape": shape, "sizes": size_lists, "candidates": config["candidates"],
           "floors": floors,
           "processes": sum(1 for r in runs if any(o["sizes"] for o in r.get("ops", {}).values())),
           "process_errors": errors, "combined": combine(runs, table_grads),
           "subject_errors": sorted({k: v for r in runs for k, v in r.get("errors", {}).items()}.items()),
           "per_process": runs}
    text = document_markdown(stem, doc, table_grads)
    write_text_atomic(json.dumps(doc, indent=1) + "\n", out / f"{stem}.json")
    write_text_atomic(text, out / f"{stem}.md")
    typer.echo(text)
    failed = bool(errors or doc["subject_errors"] or failed_bits(doc["combined"]))
    raise typer.Exit(1 if failed else 0)
