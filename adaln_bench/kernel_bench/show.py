"""A `kernel-bench` output shown (`report`), and two compared (`diff`): per operator, subject, size and kind, the ratio to the stock path before
and after (pure).

The ratio is what kernel-bench pairs in the same rounds, so it is the figure that survives a change of machine
state; a change of it by more than the threshold is WORSE (a larger ratio) or BETTER. A candidate that lost its
bits across sizes is WORSE whatever its times; a figure only one side has is MISSING (in OLD only) or NEW.
Outputs from different GPUs or shapes are not comparable.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Optional

from adaln_bench.datamodel.kernel_bench import COPY, KINDS, STOCK, KernelBenchReport
from adaln_bench.kernel_bench.render import report_markdown
from adaln_bench.reports.display import clip

DEFAULT_THRESHOLD = 0.05


def show(report: KernelBenchReport, stem: str) -> str:
    """The output's Markdown fit for a terminal: its names are data from elsewhere, control characters escaped."""
    text = report_markdown(report, stem)
    return clip(text, len(text))
REGRESSIONS = ("WORSE", "MISSING")


@dataclass(frozen=True)
class RatioRow:
    op: str
    subject: str
    size: int
    kind: str  # "fwd", "fwd_bwd", or "bits"
    old: Optional[float]
    new: Optional[float]
    old_us: Optional[float] = None
    new_us: Optional[float] = None
    verdict: str = "SAME"

    @property
    def change(self) -> Optional[float]:
        if self.old is None or self.new is None or self.old == 0:
            return None
        return self.new / self.old - 1.0


@dataclass
class KernelBenchDiff:
    rows: list[RatioRow] = field(default_factory=list)
    not_comparable: list[str] = field(default_factory=list)
    threshold: float = DEFAULT_THRESHOLD

    @property
    def comparable(self) -> bool:
        return not self.not_comparable

    @property
    def regressions(self) -> list[RatioRow]:
        return [r for r in self.rows if r.verdict in REGRESSIONS]

    @property
    def changes(self) -> list[RatioRow]:
        return [r for r in self.rows if r.verdict != "SAME"]


def judge(old: Optional[float], new: Optional[float], threshold: float) -> str:
    if old is None and new is None:
        return "SAME"
    if new is None:
        return "MISSING"
    if old is None:
        return "NEW"
    if old > 0 and new / old - 1.0 > threshold:
        return "WORSE"
    if old > 0 and new / old - 1.0 < -threshold:
        return "BETTER"
    return "SAME"


def blockers(old: KernelBenchReport, new: KernelBenchReport, allow_different_device: bool) -> list[str]:
    out = []
    if old.device.name != new.device.name and not allow_different_device:
        out.append(f"different GPUs: {old.device.name} and {new.device.name}")
    if old.shape != new.shape:
        out.append(f"different shapes: {old.shape} and {new.shape}")
    if not set(old.ops) & set(new.ops):
        out.append("no operator in common")
    return out


def _invariant(report: KernelBenchReport, op: str, subject: str) -> Optional[bool]:
    bits = report.ops[op].bits
    if bits is None or subject not in bits.subjects:
        return None
    r = bits.subjects[subject]
    return bool(r.invariant) and r.repeatable is not False


def diff_kernel_bench(old: KernelBenchReport, new: KernelBenchReport, threshold: float = DEFAULT_THRESHOLD,
                      allow_different_device: bool = False) -> KernelBenchDiff:
    result = KernelBenchDiff(not_comparable=blockers(old, new, allow_different_device), threshold=threshold)
    if not result.comparable:
        return result
    for op in [o for o in new.ops if o in old.ops]:
        a, b = old.ops[op], new.ops[op]
        for size in sorted({int(s) for s in a.rows} | {int(s) for s in b.rows}):
            ra, rb = a.rows.get(str(size)), b.rows.get(str(size))
            for kind in KINDS:
                fa, fb = (getattr(ra, kind) if ra else {}), (getattr(rb, kind) if rb else {})
                for subject in dict.fromkeys([*fa, *fb]):
                    if subject in (STOCK, COPY):
                        continue
                    x, y = fa.get(subject), fb.get(subject)
                    ox, oy = (x.vs_stock if x else None), (y.vs_stock if y else None)
                    result.rows.append(RatioRow(op, subject, size, kind, ox, oy, x.us if x else None,
                                                y.us if y else None, judge(ox, oy, threshold)))
        for subject in [s for s in b.subjects if s != STOCK and s in a.subjects]:
            was, now = _invariant(old, op, subject), _invariant(new, op, subject)
            if was is not None and now is not None and was != now:
                verdict = "WORSE" if was and not now else "BETTER"
                result.rows.append(RatioRow(op, subject, 0, "bits", float(was), float(now), verdict=verdict))
    return result


def exit_code(diff: KernelBenchDiff, fail_on: str = "regression") -> int:
    """As `diff`'s: 0 none, 1 a regression (any change with "any-change"), 3 not comparable."""
    if not diff.comparable:
        return 3
    if fail_on == "never":
        return 0
    return 1 if (diff.changes if fail_on == "any-change" else diff.regressions) else 0


def _ratio(v: Optional[float]) -> str:
    return "–" if v is None else f"{v:.3f}×"


def _row_text(r: RatioRow) -> list[str]:
    if r.kind == "bits":
        word = lambda v: "invariant" if v else "NOT invariant"  # noqa: E731
        return [r.op, r.subject, "–", "bits", word(r.old), word(r.new), "", r.verdict]
    change = "–" if r.change is None else f"{100 * r.change:+.1f} %"
    return [r.op, r.subject, str(r.size), r.kind.replace("_", "+"), _ratio(r.old), _ratio(r.new), change, r.verdict]


def to_markdown(diff: KernelBenchDiff, old_name: str, new_name: str, code: int, show_all: bool = False) -> str:
    lines = [f"# kernel-bench diff: {old_name} → {new_name}", ""]
    if not diff.comparable:
        lines += ["Not comparable: " + "; ".join(diff.not_comparable) + ".", "", f"Exit {code}.", ""]
        return "\n".join(lines)
    rows = diff.rows if show_all else diff.changes
    lines += [f"Ratio to the stock path (paired in the same rounds), per size; a change beyond "
              f"{100 * diff.threshold:g} % counts. {len(diff.regressions)} regression(s), "
              f"{len(diff.changes)} change(s) in {len(diff.rows)} row(s).", ""]
    if rows:
        lines += ["| operator | subject | size | kind | OLD × stock | NEW × stock | change | verdict |",
                  "|" + " --- |" * 8]
        lines += ["| " + " | ".join(_row_text(r)) + " |" for r in rows]
    else:
        lines.append("Every ratio the same within the threshold.")
    lines += ["", f"Exit {code}.", ""]
    return "\n".join(lines)


def to_json(diff: KernelBenchDiff, old_name: str, new_name: str, code: int) -> dict:
    return {"kind": "kernel_bench_diff", "old": old_name, "new": new_name, "comparable": diff.comparable,
            "not_comparable": diff.not_comparable, "threshold": diff.threshold, "exit_code": code,
            "rows": [{**asdict(r), "change": r.change} for r in diff.rows]}
