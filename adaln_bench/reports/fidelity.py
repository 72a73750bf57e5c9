"""How one GPU's reports compare with RL-Kernel's reports from another GPU, operator by operator.

A diff (reports/diff.py) compares two runs of one device and gives regressions. Across two devices the
questions differ: does each candidate reach the same invariance verdict, how do the times compare, and which
errors against FP64 agree to every digit, and why not the others? Same seeds do not give the same tensors on
GPUs of different SM counts (docs/spec.md#11-seeded-draws-on-another-gpu, docs/environments.md): PyTorch's CUDA random kernel
strides its Philox subsequences by SM count × 2048, so a `randn`/`rand` tensor agrees across the two only on
as many elements as the smaller stride. An error whose inputs all fit agrees unless the kernels differ
(`implementation`); one with an input beyond it may differ for the inputs alone (`draw`). The operators'
declarations (adaln_bench/ops) give every tensor's size. No I/O here: the command reads the files.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from math import prod
from typing import TYPE_CHECKING, Literal, Mapping, Optional

from adaln_bench.reports.diff import device_kind
from adaln_bench.datamodel.schema import PRIOR_ART_KIND, AccuracyLatency, CandidateResult, Report
from adaln_bench.shape import SYMBOLS, Shape

if TYPE_CHECKING:  # the operators' declarations import torch: read only when a comparison needs them
    from adaln_bench.ops.spec import Operator

# The sizes whose forward + backward times the section shows, per size family; those a report has are shown.
LATENCY_SIZES = {"T": ("1", "3", "256", "2048"), "S": ("4097", "32768")}

# Streaming multiprocessors by GPU model: PyTorch's CUDA generator launches at most SMs × 2048 threads, and
# that count is the stride from an element to its Philox subsequence.
GPU_SMS = {"H100": 132, "H200": 132, "B200": 148}
THREADS_PER_SM = 2048

# RL-Kernel's reports record no shape, but their kind only ever measured MiniMax-H3.
H3_SIZES = {"dim": 2688, "hidden": 5376, "modalities": 3, "frequency": 256, "out_features": 96768}

FWD = "fwd"  # the forward error's name among an operator's errors; the others are its inputs' names
UPSTREAM = "upstream"  # the accuracy probe's upstream gradient, among the tensors drawn differently

Reason = Literal["draw", "implementation", "fp64 rounding"]
# Two errors this close are the same error of the same candidate on the same inputs: what is left is the FP64
# reference's own rounding on each GPU (its GEMMs sum in another order). The projection's forward error at T = 1
# with B200 draws on an H200: 0.0038564881286387485 against the B200's 0.003856488128639106.
FP64_ROUNDING = 1e-9


# --- the GPUs' random geometry ----------------------------------------------------------------------


@dataclass(frozen=True)
class DrawGeometry:
    """How one side drew its seeded tensors: as on the GPU that ran it, or as a report's `draw_geometry`
    says ({"name", "sms"}: draws made as on a GPU of that many SMs)."""

    gpu: Optional[str]  # the GPU that ran the report
    name: Optional[str]  # the GPU the draws were made as
    sms: Optional[int]  # None: a GPU not in GPU_SMS
    declared: bool = False  # True when the report's draw_geometry says so

    @property
    def stride(self) -> Optional[int]:
        return None if self.sms is None else self.sms * THREADS_PER_SM

    def describe(self) -> str:
        sms = f"{self.sms} SMs" if self.sms is not None else "SMs unknown"
        return f"{self.name or 'unknown GPU'} ({sms}{', its draw_geometry' if self.declared else ''})"


def gpu_sms(gpu: Optional[str]) -> Optional[int]:
    """The SM count of a GPU named like "NVIDIA H200" or "NVIDIA H100 80GB HBM3"; None when unknown."""
    if not gpu:
        return None
    for model, sms in GPU_SMS.items():
        if re.search(rf"(?<![A-Z0-9]){model}(?![0-9])", gpu.upper()):
            return sms
    return None


def draw_geometry(report: Report) -> DrawGeometry:
    gpu = report.environment.gpu
    declared = report.draw_geometry.model_dump() if report.draw_geometry is not None else None
    if isinstance(declared, dict) and isinstance(declared.get("sms"), int) and not isinstance(declared["sms"], bool):
        return DrawGeometry(gpu, str(declared.get("name") or f"{declared['sms']} SMs"), declared["sms"], True)
    return DrawGeometry(gpu, gpu, gpu_sms(gpu))


# --- comparability ----------------------------------------------------------------------------------


def report_sizes(report: Report) -> Optional[dict[str, int]]:
    """The model sizes a report measured at: its shape, RL-Kernel's implied H3, or None when unrecorded."""
    if report.shape is not None:
        return report.shape.sizes()
    return dict(H3_SIZES) if report.kind == PRIOR_ART_KIND else None


def _sizes_text(sizes: Mapping[str, int]) -> str:
    symbols = {**SYMBOLS, "out_features": "N"}
    return " ".join(f"{symbols.get(k, k)}={v}" for k, v in sizes.items())


def not_comparable(reference: Report, report: Report) -> list[str]:
    """Why two reports' numbers may not be set side by side (empty: they may). As `diff` does: the same
    operator, the same shape and the same seeded recipe (a quick run's probes use other sizes and batches),
    and here both must be full GPU runs. Inputs drawn differently on another GPU are reported, not refused."""
    reasons = []
    if reference.op != report.op:
        reasons.append(f"different operators: REFERENCE {reference.op}, REPORT {report.op}")
    for side, r in (("REFERENCE", reference), ("REPORT", report)):
        if device_kind(r) != "cuda" or not r.environment.gpu:
            where = r.environment.gpu or device_kind(r) or "an unknown device"
            reasons.append(f"{side} of {r.op} ran on {'the CPU' if where == 'cpu' else where}: fidelity "
                           "compares two GPU runs")
        if r.quick:
            reasons.append(f"{side} of {r.op} is a quick report: its probes use other sizes than a full run's")
    a, b = report_sizes(reference), report_sizes(report)
    if a is not None and b is not None and any(a[k] != b[k] for k in a.keys() & b.keys()):
        reasons.append(f"different shapes for {report.op}: REFERENCE {_sizes_text(a)}, REPORT {_sizes_text(b)}")
    return reasons


def sets_not_comparable(references: Mapping[str, Report], reports: Mapping[str, Report]) -> list[str]:
    """Why two sets of reports, each keyed by operator, may not be compared: no operator on both sides, or
    an operator whose two reports are not comparable (an operator on one side only is named, not refused)."""
    common = [op for op in references if op in reports]
    if not common:
        return [f"no operator on both sides: REFERENCE has {', '.join(references)}, REPORT has {', '.join(reports)}"]
    return [reason for op in common for reason in not_comparable(references[op], reports[op])]


# --- which inputs the two GPUs drew differently -----------------------------------------------------


@dataclass(frozen=True)
class DrawnDifferently:
    """Per size, the tensors one side drew differently from the other: floating inputs (row inputs at that
    size, parameters at any) and the accuracy probe's upstream gradient. `limit` is the smaller stride: a
    tensor of more elements differs. `unknown` says why no reason can be given (then nothing is listed)."""

    limit: Optional[int]
    by_size: dict[str, tuple[str, ...]]
    unknown: Optional[str] = None

    def reason(self, size: str, quantity: str) -> Optional[Reason]:
        """`draw` when a tensor that error may read differs (the forward's: every floating input; a
        gradient's: those and the upstream), `implementation` when none does; None when that cannot be said.
        Which inputs a gradient really reads is not asked: dW of a linear does not read W, yet is `draw`."""
        if self.unknown is not None or size not in self.by_size:
            return None
        feeding = [t for t in self.by_size[size] if quantity != FWD or t != UPSTREAM]
        return "draw" if feeding else "implementation"


def _shape_of(reference: Report, report: Report) -> Optional[Shape]:
    """The sizes both sides measured at (they agree where both record one). A size neither records is one the
    operator does not read (a report records every size its operator's tensors name), so H3's stands in."""
    recorded = [sizes for sizes in (report_sizes(reference), report_sizes(report)) if sizes is not None]
    if not recorded:
        return None
    full = {**H3_SIZES, **recorded[0], **recorded[-1]}
    return Shape(dim=full["dim"], hidden=full["hidden"], modalities=full["modalities"], frequency=full["frequency"])


def drawn_differently(op: Optional[Operator], reference: Report, report: Report,
                      sizes: tuple[str, ...]) -> DrawnDifferently:
    """What the two sides drew differently at each size, from `op`'s declarations (None: not registered)."""
    ours, theirs = draw_geometry(report), draw_geometry(reference)
    for g in (theirs, ours):
        if g.sms is None:
            return DrawnDifferently(None, {}, f"unknown GPU ({g.name or 'none named'}), reason not given")
    if ours.sms == theirs.sms:  # the same geometry draws the same numbers from the same seeds
        return DrawnDifferently(None, {s: () for s in sizes})
    if op is None:
        return DrawnDifferently(None, {}, f"operator {report.op} is not in the registry, reason not given")
    from adaln_bench.ops.spec import Packed

    shape = _shape_of(reference, report)
    if shape is None:
        return DrawnDifferently(None, {}, "the model's sizes are not recorded, reason not given")
    limit = min(ours.stride, theirs.stride)
    by_size = {}
    for size in sizes:
        if not size.isdigit():
            continue
        n = int(size)
        names = [t.name for t in op.tensors if not isinstance(t.draw, Packed) and prod(t.shape(shape, n)) > limit]
        upstream = sum(prod(o.shape(shape, n)) for o in op.outputs)  # one randn of the flattened outputs
        if op.grads and upstream > limit:
            names.append(UPSTREAM)
        by_size[size] = tuple(names)
    return DrawnDifferently(limit, by_size)


# --- the comparison ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class ErrorCell:
    """One error against FP64 at one size, on both sides; `reason` only for two unequal values."""

    size: str
    quantity: str  # FWD or an input's name
    there: Optional[float]
    here: Optional[float]
    reason: Optional[Reason] = None

    @property
    def equal(self) -> Optional[bool]:
        if self.there is None or self.here is None:
            return None
        return self.there == self.here


@dataclass(frozen=True)
class CandidateFidelity:
    mode: str
    candidate: str  # the reference's name; `here_name` is the report's (`diffusers[plain]` for `diffusers`)
    here_name: str
    reference_invariant: Optional[bool]  # None: the reference has no result (unavailable, not probed)
    invariant: Optional[bool]  # None: this report has none
    fwd_bwd_ratio: dict[str, Optional[float]]  # here ÷ there per shown size (None where a side lacks it)
    errors: tuple[ErrorCell, ...]

    @property
    def verdict_same(self) -> Optional[bool]:
        if self.reference_invariant is None or self.invariant is None:
            return None
        return self.reference_invariant == self.invariant

    def error(self, size: str, quantity: str) -> Optional[ErrorCell]:
        return next((e for e in self.errors if e.size == size and e.quantity == quantity), None)


@dataclass(frozen=True)
class OperatorFidelity:
    op: str
    reference_name: str
    report_name: str
    reference_draws: DrawGeometry
    draws: DrawGeometry
    size_symbol: str  # T or S
    latency_sizes: tuple[str, ...]
    error_sizes: tuple[str, ...]
    quantities: tuple[str, ...]  # FWD, then every input with a gradient error on either side
    rows: tuple[CandidateFidelity, ...]
    drawn: DrawnDifferently

    @property
    def compared(self) -> list[bool]:
        return [r.verdict_same for r in self.rows if r.verdict_same is not None]


@dataclass(frozen=True)
class Fidelity:
    operators: tuple[OperatorFidelity, ...]
    only_reference: tuple[str, ...] = ()  # operators the other side has no report of
    only_report: tuple[str, ...] = ()

    @property
    def verdicts_agree(self) -> bool:
        """Every candidate measured on both sides reached the same verdict (and at least one was)."""
        compared = [v for op in self.operators for v in op.compared]
        return bool(compared) and all(compared)


def _result(report: Report, mode: str, name: str) -> Optional[CandidateResult]:
    entry = report.results.get(mode, {}).get(name)
    return entry if isinstance(entry, CandidateResult) else None


def _base_name(name: str, mode: str) -> str:
    """`diffusers[plain]` under plain is `diffusers`: the GEMM operators' stock path is named by its mode."""
    suffix = f"[{mode}]"
    return name[:-len(suffix)] if name.endswith(suffix) else name


def _pairs(reference: Report, report: Report) -> list[tuple[str, str, str]]:
    """(mode, reference's name, report's name) for every candidate both sides have, the reference's order."""
    pairs = []
    for mode, theirs in reference.results.items():
        ours = {_base_name(name, mode): name for name in report.results.get(mode, {})}
        for name in theirs:
            here = ours.get(_base_name(name, mode))
            if here is not None:
                pairs.append((mode, name, here))
    return pairs


def _invariant(entry: Optional[CandidateResult]) -> Optional[bool]:
    if entry is None or entry.batch_invariance is None:
        return None
    return entry.batch_invariance.batch_invariant


def _point(entry: Optional[CandidateResult], size: str) -> Optional[AccuracyLatency]:
    return entry.accuracy_latency.get(size) if entry is not None else None


def _ratio(ours: Optional[AccuracyLatency], theirs: Optional[AccuracyLatency]) -> Optional[float]:
    if ours is None or theirs is None or not ours.fwd_bwd_us or not theirs.fwd_bwd_us:
        return None
    return ours.fwd_bwd_us / theirs.fwd_bwd_us


def _errors_of(point: Optional[AccuracyLatency]) -> dict[str, Optional[float]]:
    if point is None:
        return {}
    grads = point.grad_rel_err.errors() if point.grad_rel_err is not None else {}
    return {FWD: point.fwd_rel_err, **grads}


def _size_key(size: str) -> tuple[int, str]:
    return (int(size), size) if size.isdigit() else (1 << 62, size)


def _union(*groups) -> list[str]:
    """The items of every group, each once, in the order first seen."""
    return list(dict.fromkeys(item for group in groups for item in group))


def compare_operator(reference: Report, report: Report, reference_name: str = "REFERENCE",
                     report_name: str = "REPORT") -> OperatorFidelity:
    """One row per candidate both reports have, every error at every size either side measured."""
    from adaln_bench.ops.registry import all_operators

    pairs = _pairs(reference, report)
    entries = [(mode, name, here, _result(reference, mode, name), _result(report, mode, here))
               for mode, name, here in pairs]
    sizes = sorted(_union(*(entry.accuracy_latency for *_, theirs, ours in entries for entry in (theirs, ours)
                            if entry is not None)), key=_size_key)
    op = all_operators().get(report.op)
    symbol = op.family.size_symbol if op is not None else "n"
    latency_sizes = tuple(s for s in LATENCY_SIZES.get(symbol, tuple(sizes)) if s in sizes)
    drawn = drawn_differently(op, reference, report, tuple(sizes))
    quantities = _union([FWD], *(_errors_of(_point(entry, s)) for *_, theirs, ours in entries
                                 for entry in (theirs, ours) for s in sizes))
    rows = []
    for mode, name, here, theirs, ours in entries:
        cells = []
        for size in sizes:
            a, b = _errors_of(_point(theirs, size)), _errors_of(_point(ours, size))
            for q in quantities:
                there, mine = a.get(q), b.get(q)
                if there is None and mine is None:
                    continue
                reason = None
                if there is not None and mine is not None and there != mine:
                    close = abs(there - mine) <= FP64_ROUNDING * max(abs(there), abs(mine))
                    reason = "fp64 rounding" if close and drawn.reason(size, q) != "draw" else drawn.reason(size, q)
                cells.append(ErrorCell(size, q, there, mine, reason))
        rows.append(CandidateFidelity(
            mode=mode, candidate=name, here_name=here,
            reference_invariant=_invariant(theirs), invariant=_invariant(ours),
            fwd_bwd_ratio={s: _ratio(_point(ours, s), _point(theirs, s)) for s in latency_sizes},
            errors=tuple(cells)))
    return OperatorFidelity(report.op, reference_name, report_name, draw_geometry(reference), draw_geometry(report),
                            symbol, latency_sizes, tuple(sizes), tuple(quantities), tuple(rows), drawn)


def compare_sets(references: Mapping[str, tuple[str, Report]], reports: Mapping[str, tuple[str, Report]]) -> Fidelity:
    """Each operator with a report on both sides (by `op`, the reference's order), as (name, report) pairs."""
    ops = [op for op in references if op in reports]
    return Fidelity(
        tuple(compare_operator(references[op][1], reports[op][1], references[op][0], reports[op][0]) for op in ops),
        tuple(op for op in references if op not in reports), tuple(op for op in reports if op not in references))


# --- Markdown ---------------------------------------------------------------------------------------


def _yes_no(value: Optional[bool]) -> str:
    return "—" if value is None else ("yes" if value else "no")


def _ratio_text(value: Optional[float]) -> str:
    return "—" if value is None else f"{value:.2f}"


def _cell_text(cell: Optional[ErrorCell]) -> str:
    if cell is None or cell.equal is None:
        return "—"
    if cell.equal:
        return "="
    return f"≠ {cell.reason}" if cell.reason else "≠"


def _errors_summary(row: CandidateFidelity) -> str:
    measured = [c for c in row.errors if c.equal is not None]
    if not measured:
        return "—"
    unequal = [c for c in measured if not c.equal]
    text = f"{len(measured) - len(unequal)} of {len(measured)} ="
    if unequal:
        reasons = {r: sum(1 for c in unequal if c.reason == r) for r in ("draw", "implementation", "fp64 rounding", None)}
        parts = [f"{k} {n}" for k, n in reasons.items() if n and k] + (
            [f"{reasons[None]} without a reason"] if reasons[None] else [])
        text += f"; {len(unequal)} ≠ ({', '.join(parts)})"
    return text


def _quantity_head(q: str) -> str:
    return "forward" if q == FWD else f"d{q}"


def _drawn_text(op: OperatorFidelity) -> str:
    drawn = op.drawn
    there, here = op.reference_draws, op.draws
    if drawn.unknown is not None:
        return f"Reasons for ≠: {drawn.unknown}."
    if drawn.limit is None:
        return (f"Both sides drew as on GPUs of {here.sms} SMs: the same seeds gave the same inputs, so every ≠ "
                f"is `implementation` (the kernels computed it differently), or `fp64 rounding` where the two agree "
                f"within {FP64_ROUNDING:g} relative: the FP64 reference's own last digits on each GPU.")
    listed = "; ".join(f"{op.size_symbol}={s}: {', '.join(names) if names else 'none'}"
                       for s, names in drawn.by_size.items())
    return (f"Reasons for ≠, by a simple rule (every error is taken to read every floating input at that size, "
            "and a gradient's error the upstream gradient too): `draw` when one of those is a CUDA randn/rand of "
            f"more than {drawn.limit:,} elements, the smaller of the two strides (SM count × {THREADS_PER_SM}: "
            f"{there.describe()} there, {here.describe()} here), whose elements beyond it the two GPUs draw "
            "differently from the same seed (the kernels may differ too); `implementation` when all of them are "
            "identical on the two GPUs, so the difference is the kernels'. The index inputs are CPU draws, "
            f"identical everywhere. Tensors drawn differently on the two GPUs: {listed}.")


def operator_markdown(op: OperatorFidelity) -> str:
    there, here = op.reference_draws, op.draws
    agree = ("agree for every candidate measured on both." if op.compared and all(op.compared)
             else "do not all agree." if op.compared else "were not measured on both for any candidate.")
    ratio_heads = " / ".join(op.latency_sizes) or "—"
    lines = [
        f"## {op.op}",
        "",
        f"Against `{op.reference_name}` ({there.gpu or 'unknown GPU'}), for `{op.report_name}` "
        f"({here.gpu or 'unknown GPU'}). Invariance verdicts {agree}",
        "Time ratio: forward + backward here ÷ there. Errors: every relative error against FP64 (the forward's "
        f"and each input's gradient's) at every {op.size_symbol} either side measured, equal to every digit (=) "
        "or not (≠); — where one side has none.",
        _drawn_text(op),
        "",
        f"| mode | candidate | invariant there | invariant here | same verdict | time ratio {op.size_symbol} = "
        f"{ratio_heads} | errors equal |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for row in op.rows:
        ratios = " / ".join(_ratio_text(row.fwd_bwd_ratio[s]) for s in op.latency_sizes) or "—"
        name = row.candidate if row.here_name == row.candidate else f"{row.candidate} ({row.here_name} here)"
        lines.append(f"| {row.mode} | {name} | {_yes_no(row.reference_invariant)} | {_yes_no(row.invariant)} | "
                     f"{_yes_no(row.verdict_same)} | {ratios} | {_errors_summary(row)} |")
    detail = [row for row in op.rows if any(c.equal is not None for c in row.errors)]
    if detail:
        lines += ["", f"| mode | candidate | {op.size_symbol} | " + " | ".join(map(_quantity_head, op.quantities))
                  + " |", "| --- | --- | --- | " + " | ".join("---" for _ in op.quantities) + " |"]
        for row in detail:
            for size in op.error_sizes:
                if not any(c.size == size for c in row.errors):
                    continue
                cells = " | ".join(_cell_text(row.error(size, q)) for q in op.quantities)
                lines.append(f"| {row.mode} | {row.candidate} | {size} | {cells} |")
    return "\n".join(lines) + "\n"


def to_markdown(fidelity: Fidelity) -> str:
    sections = [operator_markdown(op) for op in fidelity.operators]
    tail = []
    if fidelity.only_reference:
        tail.append(f"Not compared, no report here: {', '.join(fidelity.only_reference)}.")
    if fidelity.only_report:
        tail.append(f"Not compared, no reference report: {', '.join(fidelity.only_report)}.")
    if tail:
        sections.append("\n".join(tail) + "\n")
    return "\n".join(sections)
