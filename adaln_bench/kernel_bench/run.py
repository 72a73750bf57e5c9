"""`adaln-bench kernel-bench`, assembled: the operators, subjects and sizes resolved from the options, the child
processes run (process.py, child.py), their figures combined (kernel_bench/combine.py) into a validated
output (datamodel/kernel_bench.py), written as <stem>.json and <stem>.md.

Two forms, one pipeline: `--op` times registered candidates against each operator's stock path; without it, the
bundled projection libraries (`--library`) are the projection's subjects beside its stock path (cuBLAS), with
their C entry points, the projection's bits sizes and a finer stop rule. The timed processes run first, then one
that checks bits and errors, so that a slow check cannot cost the times.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

from adaln_bench.errors import UserError
from adaln_bench.kernel_bench.process import ProcessSpec, log, run_processes

PROJECTION = "adaln_projection"
TOKEN_SIZES = "4097,32768,131072"
TIMESTEP_SIZES = "1,3,4,64,256,2048"
ALL = "all"
# The projection's bits sizes: both sides of each tier bound of sm90_config.h and of the portable path's 512-row
# d_act block, under a whole batch of 2048 rows (the sm90 path's 2048-row block is crossed in tests/gpu).
PROJECTION_BITS_SIZES = [1, 2, 3, 4, 8, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 129, 255, 256, 257, 300, 511,
                         512, 513, 1000, 1024, 1500, 2047, 2048]


@dataclass
class Options:
    """What the command line asked for (commands/kernel_bench.py)."""

    ops: list[str] = field(default_factory=list)
    candidates: list[str] = field(default_factory=list)
    libraries: list[str] = field(default_factory=list)
    sizes: Optional[str] = None
    processes: int = 3
    entries: bool = True
    bits: bool = True
    accuracy_sizes: str = "64,2048"
    shape: str = "h3"
    out: Path = Path("kernel-bench-out")
    name: Optional[str] = None
    process_timeout: float = 540.0
    budget: Optional[float] = None


def parse_sizes(text: str, what: str) -> list[int]:
    try:
        sizes = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise UserError(f"{what} takes token counts like 1,64,2048, not {text!r}") from None
    if not sizes or min(sizes) < 1:
        raise UserError(f"{what} takes positive token counts, not {text!r}")
    return sizes


def resolve_ops(names: list[str], candidates: list[str]) -> list[str]:
    """The operators named (ALL: every one with a candidate of the first name), each known and with every
    candidate named."""
    from adaln_bench.ops.candidates import candidates_of
    from adaln_bench.ops.registry import all_operators, get_operator

    if ALL in names:
        names = [n for n in all_operators() if candidates and candidates[0] in candidates_of(n)]
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
    """The token operators' S = 4097, 32768, 131072; the timestep operators' T sizes."""
    from adaln_bench.ops.registry import get_operator

    return TOKEN_SIZES if get_operator(op).family.size_symbol == "S" else TIMESTEP_SIZES


@dataclass(frozen=True)
class Plan:
    """The resolved run: the spec every timed process gets, and the checking process's."""

    timed: ProcessSpec
    check: Optional[ProcessSpec]
    stem_prefix: str


def plan(o: Options) -> Plan:
    """The options checked and resolved (before any GPU is touched: bad input is one line, exit 2)."""
    from adaln_bench.harness.assembly.shapes import PRESETS
    from adaln_bench.kernel_bench.subjects import SpecError, parse_library

    if o.shape not in PRESETS:
        raise UserError(f"--shape {o.shape!r}: known presets are {', '.join(PRESETS)}")
    try:
        specs = [parse_library(x) for x in o.libraries]
    except SpecError as exc:
        raise UserError(str(exc)) from None
    if len({s.name for s in specs}) != len(specs):
        raise UserError("--library: two libraries have the same name")
    missing = [s.file for s in specs if s.file and not Path(s.file).is_file()]
    if missing:  # before any process starts: each would fail on it
        raise UserError(f"--library: no such library file: {missing[0]}")
    if not o.ops:
        if o.candidates or o.budget is not None:
            raise UserError("--candidate and --budget go with --op")
        sizes = {PROJECTION: parse_sizes(o.sizes or TIMESTEP_SIZES, "--sizes")}
        accuracy = parse_sizes(o.accuracy_sizes, "--accuracy-sizes") if o.accuracy_sizes else []
        timed = ProcessSpec(shape=o.shape, ops=[PROJECTION], libraries=list(o.libraries), sizes=sizes,
                            entries=o.entries, rule="fine")
        check = timed.model_copy(update={"timing": False, "bits": True, "entries": False,
                                         "bits_sizes": {PROJECTION: PROJECTION_BITS_SIZES},
                                         "accuracy_sizes": {PROJECTION: accuracy}}) if o.bits else None
        return Plan(timed, check, "kernel_bench")
    candidates = list(dict.fromkeys(o.candidates or ["bundled"]))
    if "stock" in candidates or "copy" in candidates:
        raise UserError("--candidate: 'stock' and 'copy' are the names of the stock path and of the copy")
    ops = resolve_ops(o.ops, candidates)
    if not ops:
        raise UserError(f"--op {ALL}: no operator has a candidate named {candidates[0]!r}")
    if o.libraries and PROJECTION not in ops:
        raise UserError(f"--library names bundled {PROJECTION} libraries: add --op {PROJECTION}")
    clash = [s.name for s in specs if s.name in candidates]
    if clash:
        raise UserError(f"--library {clash[0]!r}: a candidate has that name; name the library otherwise")
    sizes = {n: parse_sizes(o.sizes or default_sizes(n), "--sizes") for n in ops}
    timed = ProcessSpec(shape=o.shape, ops=ops, candidates=candidates, libraries=list(o.libraries), sizes=sizes,
                        entries=o.entries and bool(o.libraries))
    check = timed.model_copy(update={"timing": False, "bits": True, "entries": False}) if o.bits else None
    return Plan(timed, check, "kernel_bench.ops")


def header(commit: Optional[str], dirty: Optional[bool]) -> dict:
    """The tool and device an output records (CUDA is there: the caller checked)."""
    import torch

    major, minor = torch.cuda.get_device_capability(0)
    return {"tool": {"commit": commit, "dirty": dirty, "torch": torch.__version__, "cuda": torch.version.cuda},
            "device": {"name": torch.cuda.get_device_name(0), "capability": f"{major}.{minor}"}}


def default_libraries() -> list[str]:
    """Every code path this GPU runs: sm90 and portable on compute capability 9.0, else portable."""
    import torch

    return ["sm90", "portable"] if torch.cuda.get_device_capability(0) == (9, 0) else ["portable"]


def assemble(p: Plan, runs: list[dict], errors: list[str], head: dict):
    """The validated output from the processes' results."""
    from adaln_bench.harness.assembly.shapes import PRESETS
    from adaln_bench.kernel_bench.floors import floors_for
    from adaln_bench.ops.registry import get_operator
    from adaln_bench.kernel_bench.combine import combine
    from adaln_bench.datamodel.kernel_bench import KernelBenchReport

    spec = p.timed
    shape = PRESETS[spec.shape]
    table_grads = {n: tuple(get_operator(n).table_grads) for n in spec.ops}
    floors = {n: f for n in spec.ops if (f := floors_for(n, shape, spec.sizes[n]))}
    combined = combine(runs, table_grads, floors)
    doc = {**head, "shape": spec.shape, "sizes": spec.sizes,
           "candidates": [*spec.candidates, *(lib.partition("=")[0] for lib in spec.libraries)],
           "floors": floors, "processes": sum(1 for r in runs if any(o.get("sizes") for o in r.get("ops", {}).values())),
           "process_errors": errors, "combined": combined,
           "subject_errors": sorted({k: v for r in runs for k, v in r.get("errors", {}).items()}.items()),
           "per_process": runs}
    return KernelBenchReport.model_validate(doc)


def run(o: Options, echo: Callable[[str], None] = print) -> int:
    """The whole command: 0 when every process ran and every candidate kept its bits; 1 otherwise."""
    from adaln_bench.harness.measurement.environment import tool_git_state
    from adaln_bench.harness.processes.stop_signals import StopSignals
    from adaln_bench.datamodel.io import write_text_atomic
    from adaln_bench.kernel_bench.combine import failed_bits
    from adaln_bench.kernel_bench.render import document_markdown

    p = plan(o)
    import torch

    if not torch.cuda.is_available():
        raise UserError("kernel-bench times CUDA kernels: no CUDA GPU is visible here")
    if not o.ops and not o.libraries:
        libs = default_libraries()
        p = Plan(p.timed.model_copy(update={"libraries": libs}),
                 p.check.model_copy(update={"libraries": libs}) if p.check else None, p.stem_prefix)
    commit, dirty = tool_git_state()
    stem = o.name or f"{p.stem_prefix}.{(commit or 'nocommit')[:7]}{'-dirty' if dirty else ''}"
    o.out.mkdir(parents=True, exist_ok=True)
    count = o.processes + (1 if p.check else 0)
    with StopSignals() as stops, stops.raising():  # Ctrl-C, SIGTERM: the finished processes are kept
        runs, errors = run_processes(lambda i: p.timed if i < o.processes else p.check, count, o.out,
                                     o.process_timeout, budget_s=o.budget, stop_cause=stops.cause)
    if not runs:
        log("kernel-bench: no process gave a result")
        return stops.exit_code or 1
    report = assemble(p, runs, errors, header(commit, dirty))
    doc = report.document()
    text = document_markdown(stem, doc)
    write_text_atomic(report.model_dump_json(indent=1) + "\n", o.out / f"{stem}.json")
    write_text_atomic(text, o.out / f"{stem}.md")
    echo(text)
    if stops.exit_code is not None:  # 130 or 143, as the shell reports the signal
        return stops.exit_code
    return 1 if (errors or doc["subject_errors"] or failed_bits(doc["combined"])) else 0
