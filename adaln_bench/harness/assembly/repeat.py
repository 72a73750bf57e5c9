"""`run --repeat K`: each mode's latency measured in K fresh processes, every sample kept.

Repetition 1 is the ordinary run of every mode (probes, accuracy, latency). Repetitions 2 … K start one
latency-only child per mode part again (parts: no probes, no accuracy), each as soon as the part's repetition
before it ends, in the same runner (one GPU lease and memory ledger: its latency still runs with the GPU to
itself), queued behind every job not yet started. So they fill slots that would idle at the end of repetition 1,
and a part's K processes are apart in time, with other modes' work between them: a slow drift of the machine
(clocks, temperature, a neighbour) spreads over every mode instead of landing on the last one; one slot at a
time gives A1 B1 A2 B2 …. Device-time samples of all K processes are pooled into one `device_time` per T with
`processes = K`. Invariance, accuracy and the CUDA-event figures (RL-Kernel's median of 100 samples in one
process) come from repetition 1 alone.

`merge_device_times` and `merge_candidate` are pure; `RepeatedRun` drives a `ModeRunner` (or anything with its
`run_all`, `add_jobs` and context-manager interface) and is tested with a fake one.
"""
from __future__ import annotations

import math
from dataclasses import replace
from typing import Callable, ContextManager, Optional, Protocol, Sequence

from adaln_bench.harness.measurement.device_time import median_ratio, relative_noise
from adaln_bench.harness.measurement.parts import Parts
from adaln_bench.harness.processes.protocol import RunConfig
from adaln_bench.harness.processes.runner import ModeJob, ModeOutcome
from adaln_bench.datamodel.schema import CandidateEntry, CandidateResult, DeviceReference, DeviceTime
from adaln_bench.datamodel.stats import median


def interleaved_order(modes: Sequence[str], repeat: int) -> list[tuple[int, str]]:
    """(repetition, mode) in the order the children run one slot at a time: every mode once per repetition."""
    if repeat < 1:
        raise ValueError(f"repeat must be at least 1, not {repeat}")
    return [(rep, mode) for rep in range(1, repeat + 1) for mode in modes]


def latency_only(options: RunConfig) -> RunConfig:
    return options.model_copy(update=dict(parts=Parts(probes=False, accuracy=False, latency=True)))


def _finite_or_none(x: float) -> Optional[float]:
    return x if math.isfinite(x) else None


def _pool(parts: list[DeviceTime], samples: str, medians: str, single: str) -> tuple[list[float], list[float]]:
    pooled: list[float] = []
    per_process: list[float] = []
    for part in parts:
        pooled.extend(getattr(part, samples) or [])
        per_process.extend(getattr(part, medians) or [getattr(part, single)])
    return pooled, per_process


def merge_device_times(parts: Sequence[DeviceTime]) -> DeviceTime:
    """Pool several processes' device times of one (mode, candidate, T): samples joined, medians of the pool.

    The forward + backward is kept only if every part has it: a pool with a process missing would not be
    what `processes` says.
    """
    if not parts:
        raise ValueError("nothing to merge")
    parts = list(parts)
    first = parts[0]
    fwd, fwd_medians = _pool(parts, "fwd_samples", "fwd_process_medians", "fwd_us")
    merged = DeviceTime(
        method=first.method, fwd_us=round(median(fwd), 3), fwd_samples=fwd,
        fwd_rel_noise=_finite_or_none(relative_noise(fwd)), fwd_process_medians=fwd_medians,
        processes=sum(p.processes for p in parts),
        sm_clock_mhz_before=min((p.sm_clock_mhz_before for p in parts if p.sm_clock_mhz_before is not None),
                                default=None),
        sm_clock_mhz_after=min((p.sm_clock_mhz_after for p in parts if p.sm_clock_mhz_after is not None),
                               default=None),
        sm_clock_source=next((p.sm_clock_source for p in parts if p.sm_clock_source), None),
        throttled=(any(p.throttled for p in parts if p.throttled is not None)
                   if any(p.throttled is not None for p in parts) else None),
        capture_error=next((p.capture_error for p in parts if p.capture_error), None),
        warmup_ms=first.warmup_ms,
    )
    methods = {p.method for p in parts} | {p.fwd_bwd_method for p in parts if p.fwd_bwd_method}
    if len(methods) > 1:  # the same code in another process captured differently: say so beside the pool
        merged.capture_error = (merged.capture_error or "") + f" [methods differ between processes: " \
                                f"{', '.join(sorted(methods))}]"
        merged.capture_error = merged.capture_error.strip()
    if all(p.fwd_bwd_us is not None for p in parts):
        fb, fb_medians = _pool(parts, "fwd_bwd_samples", "fwd_bwd_process_medians", "fwd_bwd_us")
        merged.fwd_bwd_us = round(median(fb), 3)
        merged.fwd_bwd_samples = fb
        merged.fwd_bwd_rel_noise = _finite_or_none(relative_noise(fb))
        merged.fwd_bwd_process_medians = fb_medians
        merged.fwd_bwd_method = first.fwd_bwd_method
    merged.reference = merge_references(parts, merged)
    errors = sorted({p.reference_error for p in parts if p.reference_error})
    merged.reference_error = "; ".join(errors) or None
    return merged


def merge_references(parts: Sequence[DeviceTime], merged: DeviceTime) -> Optional[DeviceReference]:
    """The reference pooled in the candidate's process order, so that its samples still pair one for one with
    the merged entry's; None unless every part has the same reference (a pool of some would not pair)."""
    refs = [p.reference for p in parts]
    if any(r is None for r in refs) or len({r.what for r in refs}) != 1:
        return None
    fwd = [x for r in refs for x in r.fwd_samples]
    out = DeviceReference(what=refs[0].what, fwd_us=round(median(fwd), 3), fwd_samples=fwd,
                          fwd_ratio=median_ratio(merged.fwd_samples, fwd))
    if merged.fwd_bwd_samples is not None and all(r.fwd_bwd_samples for r in refs):
        fb = [x for r in refs for x in r.fwd_bwd_samples]
        out.fwd_bwd_us, out.fwd_bwd_samples = round(median(fb), 3), fb
        out.fwd_bwd_ratio = median_ratio(merged.fwd_bwd_samples, fb)
    return out


def _why(entry: Optional[CandidateEntry]) -> str:
    if entry is None:
        return "no entry (the mode's child did not run or gave no result)"
    return f"{entry.status or 'unavailable'}: {entry.unavailable}"


def merge_candidate(first: CandidateEntry, repeats: Sequence[Optional[CandidateEntry]]) -> CandidateEntry:
    """Repetition 1's entry with each T's device time pooled over the repetitions that gave one.

    A repetition that gave no device time (it crashed, timed out, or the candidate failed there) is left
    out of the pool, so `processes` counts only those that contributed, and `details.latency_repeats`
    says which were missing and why.
    """
    if not isinstance(first, CandidateResult):
        return first
    merged = first.model_copy(deep=True)
    missing: dict[int, str] = {}
    for key, point in merged.accuracy_latency.items():
        if point.device_time is None:
            continue
        parts = [point.device_time]
        for rep, entry in enumerate(repeats, start=2):
            if not isinstance(entry, CandidateResult):
                missing.setdefault(rep, _why(entry))
                continue
            other = entry.accuracy_latency.get(key)
            if other is not None and other.device_time is not None:
                parts.append(other.device_time)
            else:
                missing.setdefault(rep, f"no device time at T={key}")
        point.device_time = merge_device_times(parts)
    if missing:
        total = 1 + len(repeats)
        note = "; ".join(f"repetition {rep}: {why}" for rep, why in sorted(missing.items()))
        merged.details = {**(merged.details or {}),
                          "latency_repeats": f"{total - len(missing)} of {total} processes gave device time; {note}"}
    return merged


def merge_outcomes(first: dict[str, ModeOutcome], repeats: Sequence[dict[str, ModeOutcome]]) -> dict[str, ModeOutcome]:
    """Every mode of repetition 1 with its candidates' device time pooled over the later repetitions."""
    merged: dict[str, ModeOutcome] = {}
    for name, outcome in first.items():
        results = {
            op: {report_name: merge_candidate(
                entry, [rep[name].results.get(op, {}).get(report_name) if name in rep else None for rep in repeats])
                 for report_name, entry in entries.items()}
            for op, entries in outcome.results.items()
        }
        merged[name] = replace(outcome, results=results)  # the rest as it was (a shared part's claimed ops)
    return merged


class Runner(Protocol):
    def run_all(self, jobs: list[ModeJob], on_done: Callable[[str, ModeOutcome], None]) -> None: ...

    def add_jobs(self, jobs: list[ModeJob]) -> None: ...


def repeat_jobs(jobs: Sequence[ModeJob], first: dict[str, ModeOutcome]) -> list[ModeJob]:
    """The jobs worth repeating: modes that ran, with the candidates that gave a result there."""
    from adaln_bench.ops.candidates import get

    out = []
    for job in jobs:
        outcome = first.get(job.key)
        if outcome is None or outcome.run.status != "ok":
            continue
        work = []
        for w in job.work:
            entries = outcome.results.get(w.op, {})
            keep = [c for c in w.candidates
                    if isinstance(entries.get(get(c, w.op).report_name(job.mode.name)), CandidateResult)]
            if keep:
                work.append(w.model_copy(update={"candidates": keep}))
        if work:
            out.append(replace(job, work=tuple(work)))  # the same interpreter (--python) for every repetition
    return out


class RepeatedRun:
    """Repetition 1 in full, then K - 1 latency-only repetitions of every mode that ran, interleaved.

    `outcomes` is the merged result so far, also after Ctrl-C (the exception propagates; what finished
    is kept). `on_done(name, outcome)` is called as each mode of repetition 1 finishes, as for a plain run;
    `on_repeat(rep, name, outcome)` as each later child finishes. A mode that a stop kept from its K processes
    (a repetition interrupted or never reached) is `interrupted`: its reports are incomplete, so they never
    replace a complete report of K processes.
    """

    def __init__(self, options: RunConfig, repeat: int,
                 make_runner: Callable[[RunConfig], ContextManager[Runner]],
                 on_repeat: Optional[Callable[[int, str, ModeOutcome], None]] = None):
        if repeat < 1:
            raise ValueError(f"repeat must be at least 1, not {repeat}")
        self.options, self.repeat, self.make_runner = options, repeat, make_runner
        self.on_repeat = on_repeat or (lambda rep, name, outcome: None)
        self.first: dict[str, ModeOutcome] = {}
        self.repeats: list[dict[str, ModeOutcome]] = []
        self._jobs: list[ModeJob] = []
        self._stopped = False

    @property
    def outcomes(self) -> dict[str, ModeOutcome]:
        merged = merge_outcomes(self.first, self.repeats)
        stopped = self._stopped or any(o.run.status == "interrupted" for rep in self.repeats for o in rep.values())
        if not stopped or self.repeat == 1:
            return merged
        for job in repeat_jobs(self._jobs, self.first):
            done = sum(1 for rep in self.repeats if job.key in rep and rep[job.key].run.status == "ok")
            if job.key in merged and done < self.repeat - 1:
                run = merged[job.key].run.model_copy(update={
                    "status": "interrupted",
                    "reason": f"stopped before its latency repetitions were done: {1 + done} of {self.repeat} "
                              "processes pooled"})
                merged[job.key] = replace(merged[job.key], run=run)
        return merged

    def _repetition(self, rep: int) -> dict[str, ModeOutcome]:
        while len(self.repeats) < rep - 1:
            self.repeats.append({})
        return self.repeats[rep - 2]

    def run(self, jobs: list[ModeJob], on_done: Callable[[str, ModeOutcome], None]) -> dict[str, ModeOutcome]:
        self._jobs = list(jobs)
        known = {job.key: job for job in jobs}
        latency = latency_only(self.options)

        def done(key: str, outcome: ModeOutcome) -> None:
            job = known[key]
            if job.repetition == 1:
                self.first[key] = outcome
                on_done(key, outcome)
                again = repeat_jobs([job], {key: outcome}) if self.repeat > 1 else []
                # Its own operators, not claimed again: the claims of repetition 1 are in the same runner.
                follow = replace(again[0], repetition=2, config=latency, shared=False) if again else None
            else:
                self._repetition(job.repetition)[job.base_key] = outcome
                self.on_repeat(job.repetition, job.base_key, outcome)
                follow = replace(job, repetition=job.repetition + 1) if job.repetition < self.repeat else None
            if follow is not None and outcome.run.status != "interrupted":
                known[follow.key] = follow
                runner.add_jobs([follow])

        try:
            with self.make_runner(self.options) as runner:
                runner.run_all(jobs, done)
        except BaseException:
            self._stopped = True
            raise
        return self.outcomes
