"""How a report on one GPU compares with RL-Kernel's report on another: the fidelity section.

A diff (reports/diff.py) compares two runs of one device and gives regressions. Across two devices the
questions differ: does each framework mode reach the same invariance verdict, how do the times compare, and
were the inputs the same? The last is answered by the W and b gradient errors at small T: dW and db sum the
same bf16 inputs in fp32, and with the same seeds they agree to every digit between the two GPUs, while the
forward errors differ (cuBLAS rounds differently on each). No I/O here: the command reads the files.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from adaln_bench.reports.schema import CandidateResult, Report

# The T whose times the section shows, and those whose W and b errors test that the inputs are the same.
LATENCY_TOKENS = ("1", "3", "256", "2048")
INPUT_CHECK_TOKENS = ("1", "3")


@dataclass(frozen=True)
class ModeFidelity:
    mode: str
    candidate: str
    reference_invariant: Optional[bool]  # None: the reference has no result for this mode
    invariant: Optional[bool]  # None: this report has no result (unavailable, failed, not run)
    # fwd+bwd time here / there, per T in LATENCY_TOKENS (None where either side lacks it)
    fwd_bwd_ratio: dict[str, Optional[float]]
    # T → (W error equal, b error equal) to every digit
    same_grad_errors: dict[str, tuple[bool, bool]]

    @property
    def verdict_same(self) -> Optional[bool]:
        if self.reference_invariant is None or self.invariant is None:
            return None
        return self.reference_invariant == self.invariant


@dataclass(frozen=True)
class Fidelity:
    reference_gpu: Optional[str]
    gpu: Optional[str]
    rows: tuple[ModeFidelity, ...]

    @property
    def verdicts_agree(self) -> bool:
        """Every mode measured on both sides reached the same verdict (and at least one was)."""
        compared = [r.verdict_same for r in self.rows if r.verdict_same is not None]
        return bool(compared) and all(compared)


def _framework_entry(report: Report, mode: str) -> tuple[Optional[str], Optional[CandidateResult]]:
    """The diffusers candidate of `mode`: the row both runners have for every framework mode."""
    name = f"diffusers[{mode}]"
    entry = report.results.get(mode, {}).get(name)
    return name, entry if isinstance(entry, CandidateResult) else None


def _invariant(entry: Optional[CandidateResult]) -> Optional[bool]:
    if entry is None or entry.batch_invariance is None:
        return None
    return entry.batch_invariance.batch_invariant


def _ratio(ours: Optional[CandidateResult], theirs: Optional[CandidateResult], tokens: str) -> Optional[float]:
    a = ours.accuracy_latency.get(tokens) if ours else None
    b = theirs.accuracy_latency.get(tokens) if theirs else None
    if a is None or b is None or not a.fwd_bwd_us or not b.fwd_bwd_us:
        return None
    return a.fwd_bwd_us / b.fwd_bwd_us


def _same_grads(ours: Optional[CandidateResult], theirs: Optional[CandidateResult]) -> dict[str, tuple[bool, bool]]:
    same = {}
    for tokens in INPUT_CHECK_TOKENS:
        a = ours.accuracy_latency.get(tokens) if ours else None
        b = theirs.accuracy_latency.get(tokens) if theirs else None
        if a is None or b is None or a.grad_rel_err is None or b.grad_rel_err is None:
            continue
        same[tokens] = (a.grad_rel_err.w == b.grad_rel_err.w, a.grad_rel_err.b == b.grad_rel_err.b)
    return same


def compare(reference: Report, report: Report) -> Fidelity:
    """One row per mode in both reports (the reference's order), for the diffusers candidate."""
    rows = []
    for mode in reference.results:
        if mode not in report.results:
            continue
        name, theirs = _framework_entry(reference, mode)
        _, ours = _framework_entry(report, mode)
        rows.append(ModeFidelity(
            mode=mode,
            candidate=name,
            reference_invariant=_invariant(theirs),
            invariant=_invariant(ours),
            fwd_bwd_ratio={t: _ratio(ours, theirs, t) for t in LATENCY_TOKENS},
            same_grad_errors=_same_grads(ours, theirs),
        ))
    return Fidelity(reference.environment.gpu, report.environment.gpu, tuple(rows))


def _yes_no(value: Optional[bool]) -> str:
    return "—" if value is None else ("yes" if value else "no")


def _ratio_text(value: Optional[float]) -> str:
    return "—" if value is None else f"{value:.2f}"


def _grads_text(same: dict[str, tuple[bool, bool]]) -> str:
    if not same:
        return "—"
    return "; ".join(f"T={t}: W {'=' if w else '≠'}, b {'=' if b else '≠'}" for t, (w, b) in same.items())


def to_markdown(fidelity: Fidelity, reference_name: str, report_name: str) -> str:
    ratio_heads = " / ".join(LATENCY_TOKENS)
    lines = [
        f"Against `{reference_name}` ({fidelity.reference_gpu or 'unknown GPU'}), for `{report_name}` "
        f"({fidelity.gpu or 'unknown GPU'}). Invariance verdicts "
        + ("agree for every mode measured on both." if fidelity.verdicts_agree else "do not all agree."),
        "Time ratio: forward + backward here ÷ there. Gradient errors: W and b relative errors at T = "
        + " and ".join(INPUT_CHECK_TOKENS) + " equal to every digit (=) or not (≠); equal ones show the inputs "
        "are the same.",
        "",
        f"| mode | invariant there | invariant here | same verdict | time ratio T = {ratio_heads} | gradient errors |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for row in fidelity.rows:
        ratios = " / ".join(_ratio_text(row.fwd_bwd_ratio[t]) for t in LATENCY_TOKENS)
        lines.append(f"| {row.mode} | {_yes_no(row.reference_invariant)} | {_yes_no(row.invariant)} | "
                     f"{_yes_no(row.verdict_same)} | {ratios} | {_grads_text(row.same_grad_errors)} |")
    return "\n".join(lines) + "\n"
