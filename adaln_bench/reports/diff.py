"""The diff engine: two reports and thresholds in, typed verdicts out. Pure: no I/O, no printing.

A verdict is given per (mode, candidate, metric[, T]):

- batch invariance: invariant → not invariant is WORSE with zero tolerance; the reverse is BETTER;
  counts that move while the candidate stays not invariant are AMBIGUOUS (shown, not a regression).
- errors against FP64: WORSE or BETTER when the change exceeds both the relative threshold and the floor;
  where params_repeatable is false on either side, a parameter gradient's error (added with atomics, it
  moves from run to run) is shown only, unless it more than doubles or halves.
- latency: WORSE or BETTER only when the medians differ by more than the threshold and the quartile
  ranges [q1, q3] do not overlap; beyond the threshold with overlapping quartiles is AMBIGUOUS. A side
  without a distribution (RL-Kernel's reference report has none) is judged on the medians alone.
- a candidate or metric that had a result and has none now is MISSING; one that is new is NEW.

WORSE and MISSING are regressions; what an incomplete NEW did not reach is shown, not counted. Only the modes
both reports have are compared (the others are listed). Reports from different devices, of different shapes,
one quick and one full, that measured different things (full, accuracy-only, latency-only), drew other inputs
or share no mode are not comparable: `ReportDiff.not_comparable` says why and no metric is compared.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Iterable, Optional

from adaln_bench.datamodel import metrics
from adaln_bench.datamodel.format import Value, duration, plain
from adaln_bench.datamodel.metrics import INVARIANT as INVARIANCE_METRIC, PointMetric
from adaln_bench.datamodel.schema import (
    PRIOR_ART_KIND,
    AccuracyLatency,
    BatchInvariance,
    CandidateEntry,
    CandidateResult,
    CandidateUnavailable,
    Distribution,
    Report,
)
from adaln_bench.datamodel.mode_environments import ENVIRONMENT_FIELDS, parent_value
from adaln_bench.reports.latency_gate import gate_device_time
from adaln_bench.reports.thresholds import Thresholds


class Verdict(str, Enum):
    SAME = "SAME"
    BETTER = "BETTER"
    WORSE = "WORSE"
    AMBIGUOUS = "AMBIGUOUS"
    MISSING = "MISSING"
    NEW = "NEW"


REGRESSION_VERDICTS = frozenset({Verdict.WORSE, Verdict.MISSING})


class FailOn(str, Enum):
    regression = "regression"
    any_change = "any-change"
    never = "never"


EXIT_OK = 0
EXIT_REGRESSION = 1
EXIT_BAD_INPUT = 2
EXIT_NOT_COMPARABLE = 3

AVAILABILITY_METRIC = "availability"
POINT_METRIC = "accuracy_latency"  # a whole T that appeared or disappeared


@dataclass(frozen=True)
class ConfigDifference:
    """One configuration field that differs; `blocks` when it makes the reports not comparable."""

    field: str
    old: Value
    new: Value
    blocks: bool = False
    note: str = ""


@dataclass(frozen=True)
class ProbeCount:
    """One count of one batch-invariance probe, on both sides. `total` is what it counts out of."""

    probe: str  # a name in metrics.PROBES: all_rows, params_repeatable, …
    what: str  # e.g. "n=257 rowgrad_differ"
    old: Value
    new: Value
    total: Optional[int] = None

    def describe(self) -> str:
        of = f" of {self.total}" if self.total is not None else ""
        label = f"{self.probe} {self.what}".strip()
        if self.old == self.new:
            return f"{label} {plain(self.new)}{of}"
        return f"{label} {plain(self.old)} → {plain(self.new)}{of}"


@dataclass(frozen=True)
class Row:
    mode: str
    candidate: str
    metric: str
    t: Optional[int]
    old: Value
    new: Value
    verdict: Verdict
    change: Optional[float] = None  # (new - old) / old where that is defined
    note: str = ""
    probes: tuple[ProbeCount, ...] = ()
    # Shown but not gated: the host-inclusive event median when device time decides, a parameter gradient
    # added with atomics that moved less than twofold, what an incomplete NEW did not reach (docs/diff.md).
    informational: bool = False

    @property
    def regression(self) -> bool:
        return not self.informational and self.verdict in REGRESSION_VERDICTS


@dataclass(frozen=True)
class ReportDiff:
    thresholds: Thresholds
    config: tuple[ConfigDifference, ...]
    not_comparable: tuple[str, ...]
    rows: tuple[Row, ...]
    # False when one report is quick and the other full (allowed): probe counts are then not compared.
    invariance_counts_compared: bool = True
    notes: tuple[str, ...] = field(default=())
    size_symbol: str = "T"  # what the rows' size is: T timesteps, or S tokens for a token operator

    @property
    def comparable(self) -> bool:
        return not self.not_comparable

    @property
    def regressions(self) -> list[Row]:
        return [row for row in self.rows if row.regression]

    @property
    def changes(self) -> list[Row]:
        return [row for row in self.rows if row.verdict is not Verdict.SAME and not row.informational]

    @property
    def listed(self) -> list[Row]:
        """What a diff lists by default: every counting row that is not SAME. The informational rows
        (host-inclusive times where device time decides) are listed with --all only: at 80 columns they
        filled several screens."""
        return [row for row in self.rows if row.verdict is not Verdict.SAME and not row.informational]

    @property
    def hidden_informational(self) -> int:
        """Informational rows that are not SAME: what `listed` leaves out and --all shows."""
        return sum(row.informational and row.verdict is not Verdict.SAME for row in self.rows)

    def verdict_counts(self) -> dict[str, int]:
        """Verdicts of the gated rows (the rows shown only are counted apart, in `informational_count`)."""
        counts = {v.value: 0 for v in Verdict}
        for row in self.rows:
            if not row.informational:
                counts[row.verdict.value] += 1
        return counts

    @property
    def informational_count(self) -> int:
        return sum(row.informational for row in self.rows)


@dataclass(frozen=True)
class Scope:
    """What can be compared between two reports that are comparable at all."""

    thresholds: Thresholds
    counts: bool = True  # probe counts and per-T presence: False for quick against full
    latency: bool = True  # False for CPU against GPU: their clocks are never compared
    new_is_quick: bool = False
    # What gates a latency: "device" time where both sides have it (else the event medians), or "events".
    latency_basis: str = "device"
    # The operator's parameter gradients (`grad_rel_err.<key>`): added with atomics where params_repeatable fails.
    param_grads: frozenset = frozenset()
    size_symbol: str = "T"


def exit_code(diff: ReportDiff, fail_on: FailOn = FailOn.regression) -> int:
    """0 no regression, 1 regression (or any change, with --fail-on any-change), 3 not comparable."""
    if not diff.comparable:
        return EXIT_NOT_COMPARABLE
    if fail_on is FailOn.never:
        return EXIT_OK
    failing = diff.changes if fail_on is FailOn.any_change else diff.regressions
    return EXIT_REGRESSION if failing else EXIT_OK


# --- configuration ----------------------------------------------------------------------------------


def device_kind(report: Report) -> Optional[str]:
    """cuda or cpu. RL-Kernel's reference report names no device but a GPU: it ran on CUDA."""
    kind = report.device or report.environment.device
    if kind is None and report.environment.gpu:
        kind = "cuda"
    return kind


# RL-Kernel's reference report records no shape, but its kind only ever measured the H3 operator
# (docs/spec.md#103-adaln_projection).
H3_SHAPE = (2688, 5376, 3, 96768)


def is_latency_only(report: Report) -> bool:
    """A `run --latency-only` report: its argv says so, or (a report without argv) no measured pair has any
    invariance probe or error against FP64."""
    argv = report.tool.argv if report.tool is not None else []
    if "--latency-only" in argv:
        return True
    measured = [e for cands in report.results.values() for e in cands.values() if isinstance(e, CandidateResult)]
    if argv or not measured:
        return False
    return all(e.batch_invariance is None and all(p.fwd_rel_err is None for p in e.accuracy_latency.values())
               for e in measured)


H3_SIZES = {"dim": 2688, "hidden": 5376, "modalities": 3, "out_features": 96768, "frequency": 256}


def _shape_key(report: Report, other: Optional[Report] = None) -> Optional[tuple]:
    """The sizes a report measured at. RL-Kernel's reports record none: H3's, restricted to the sizes the other
    report's operator records (a norm_modulate report records H and M only)."""
    s = report.shape
    if s is None:
        if report.kind != PRIOR_ART_KIND:
            return None
        names = other.shape.sizes().keys() if other is not None and other.shape is not None else None
        if names is None or _reads_out_features(report.op):
            return H3_SHAPE
        return tuple(sorted((k, H3_SIZES[k]) for k in names if k in H3_SIZES))
    if _reads_out_features(report.op) or set(s.sizes()) == {"dim", "hidden", "modalities", "out_features"}:
        return (s.dim, s.hidden, s.modalities, s.out_features)
    return tuple(sorted(s.sizes().items()))


def _reads_out_features(op: str) -> bool:
    """An operator whose tensors use N keys its sizes as (D, H, M, N), as RL-Kernel's H3 reports do."""
    from adaln_bench.ops.registry import all_operators

    operator = all_operators().get(op)
    return operator is not None and operator.reads_out_features


def _shape_text(report: Report, other: Optional[Report] = None) -> Optional[str]:
    key = _shape_key(report, other)
    if key is None:
        return None
    if report.shape is None:
        preset = f" (H3, implied by kind {report.kind})"
    else:
        preset = f" ({report.shape.preset})" if report.shape.preset else ""
    if key and isinstance(key[0], tuple):
        symbols = {"dim": "D", "hidden": "H", "modalities": "M", "out_features": "N", "frequency": "F"}
        return " ".join(f"{symbols[k]}={v}" for k, v in key) + preset
    return "D={} H={} M={} N={}".format(*key) + preset


def _capability_text(capability: Optional[list[int]]) -> Optional[str]:
    return None if capability is None else ".".join(str(x) for x in capability)


def _env_text(mapping: dict[str, str]) -> str:
    return " ".join(f"{k}={v}" for k, v in sorted(mapping.items())) or "(none)"


def compare_configuration(
    old: Report, new: Report, allow_different_device: bool, allow_quick_mismatch: bool
) -> tuple[list[ConfigDifference], list[str]]:
    """Every configuration field that differs, and the reasons (if any) the reports are not comparable."""
    diffs: list[ConfigDifference] = []
    blockers: list[str] = []
    eo, en = old.environment, new.environment

    def add(name: str, a: Value, b: Value, blocks: bool = False, note: str = "") -> None:
        if a != b:
            diffs.append(ConfigDifference(name, a, b, blocks, note))

    kind_old, kind_new = device_kind(old), device_kind(new)
    device_differs = kind_old != kind_new or (eo.gpu or None) != (en.gpu or None)
    device_blocks = device_differs and not allow_different_device
    add("device", kind_old, kind_new, device_blocks and kind_old != kind_new)
    add("gpu", eo.gpu, en.gpu, device_blocks and eo.gpu != en.gpu,
        "allowed by --allow-different-device" if device_differs and allow_different_device else "")
    if device_blocks:
        blockers.append(
            f"different devices: OLD ran on {eo.gpu or kind_old or 'an unknown device'}, "
            f"NEW on {en.gpu or kind_new or 'an unknown device'} (--allow-different-device to compare anyway)"
        )
    add("capability", _capability_text(eo.capability), _capability_text(en.capability))
    add("torch", eo.torch, en.torch)
    add("cuda", eo.cuda, en.cuda)
    add("python", eo.python, en.python)
    add("tf32", eo.tf32, en.tf32)
    for lib in _ordered_union(eo.libraries, en.libraries):
        a, b = eo.libraries.get(lib), en.libraries.get(lib)
        if a != b:
            note = "" if lib in eo.libraries and lib in en.libraries else (
                "not recorded in OLD" if lib not in eo.libraries else "not recorded in NEW")
            add(f"libraries.{lib}", a, b, note=note)
    add("megatron_source_commit", eo.megatron_source_commit, en.megatron_source_commit)
    add("mps", bool(eo.mps), bool(en.mps), note="device times read higher through the Multi-Process Service "
        "(results/h100/evidence/mps/022885c/)")
    for mode in _ordered_union(eo.mode_environment, en.mode_environment):
        a, b = eo.mode_environment.get(mode), en.mode_environment.get(mode)
        if a != b:
            add(f"mode_environment.{mode}", None if a is None else _env_text(a),
                None if b is None else _env_text(b))

    diffs.extend(compare_mode_environments(old, new))

    quick_blocks = old.quick != new.quick and not allow_quick_mismatch
    add("quick", old.quick, new.quick, quick_blocks,
        "allowed by --allow-quick-mismatch: probe counts not compared" if old.quick != new.quick
        and allow_quick_mismatch else "")
    if quick_blocks:
        blockers.append(
            f"one quick and one full report (OLD quick={str(old.quick).lower()}, NEW quick="
            f"{str(new.quick).lower()}): their invariance probes use different sizes "
            "(--allow-quick-mismatch to compare the invariance verdicts and the common T only)"
        )

    shape_old, shape_new = _shape_key(old, new), _shape_key(new, old)
    shape_blocks = shape_old is not None and shape_new is not None and shape_old != shape_new
    # Listed only when the dimensions differ or one side does not say: a preset name alone is no change.
    if shape_old != shape_new:
        note = "" if shape_old is not None and shape_new is not None else (
            f"not recorded in {'OLD' if shape_old is None else 'NEW'}")
        add("shape", _shape_text(old, new), _shape_text(new, old), shape_blocks, note)
    if shape_blocks:
        blockers.append(f"different shapes: OLD {_shape_text(old, new)}, NEW {_shape_text(new, old)}")

    geo_old, geo_new = _geometry_text(old), _geometry_text(new)
    add("draw_geometry", geo_old, geo_new,
        note="other seeded inputs: the numbers do not compare bit for bit (run --draw-geometry)")
    lo_old, lo_new = is_latency_only(old), is_latency_only(new)
    add("latency_only", lo_old, lo_new, lo_old != lo_new)
    if lo_old != lo_new:
        which = "NEW" if lo_new else "OLD"
        blockers.append(
            f"one full and one latency-only report ({which} ran with --latency-only): it has no invariance "
            "probes and no errors against FP64, which would all show as MISSING; compare two latency-only "
            "reports for latency, or two full ones")

    measured_old, measured_new = measured_parts(old), measured_parts(new)
    if lo_old == lo_new and measured_old and measured_new and measured_old != measured_new:
        add("measured", ", ".join(sorted(measured_old)), ", ".join(sorted(measured_new)), True)
        blockers.append(
            f"they measured different things (OLD: {', '.join(sorted(measured_old))}; NEW: "
            f"{', '.join(sorted(measured_new))}): what one did not measure would all show as MISSING; compare "
            "two reports of the same kind (full, --accuracy-only or --latency-only)")
    other_inputs = _modes_with_other_inputs(old, new)
    if other_inputs and not (device_differs and allow_different_device):
        blockers.append(
            f"other seeded inputs in {', '.join(other_inputs)} (modes.<mode>.inputs differ at the same seed and "
            "rows): the errors and outputs do not compare bit for bit")

    add("kind", old.kind, new.kind)
    add("op", old.op, new.op, old.op != new.op)
    if old.op != new.op:
        blockers.append(f"different operators: OLD {old.op}, NEW {new.op}")
    add("incomplete", bool(old.incomplete), bool(new.incomplete),
        note="the run was cut short; what it did not reach is shown, not counted" if new.incomplete else "")
    return diffs, blockers


def measured_parts(report: Report) -> frozenset[str]:
    """What a report measured, read from its results rather than its name or flags: invariance probes,
    errors against FP64, latency."""
    parts: set[str] = set()
    for candidates in report.results.values():
        for entry in candidates.values():
            if not isinstance(entry, CandidateResult):
                continue
            if entry.batch_invariance is not None:
                parts.add("invariance probes")
            for point in entry.accuracy_latency.values():
                if point.fwd_rel_err is not None:
                    parts.add("errors against FP64")
                if point.fwd_us is not None or point.fwd_bwd_us is not None or point.device_time is not None:
                    parts.add("latency")
    return frozenset(parts)


def _modes_with_other_inputs(old: Report, new: Report) -> list[str]:
    """Common modes whose seeded inputs differ though both drew them from the same seed and rows: other
    numbers, not a run at other sizes (quick against full draws other rows, and that has its own rule)."""
    found = []
    for mode in _ordered_union(old.modes or {}, new.modes or {}):
        a, b = (old.modes or {}).get(mode), (new.modes or {}).get(mode)
        ia, ib = (a.inputs if a else None), (b.inputs if b else None)
        if ia is None or ib is None or (ia.seed, ia.rows) != (ib.seed, ib.rows):
            continue
        ha, hb = ia.tensor_hashes(), ib.tensor_hashes()
        shared = set(ha) & set(hb)
        if any(ha[k] != hb[k] for k in shared) or ia.upstream_sha256 != ib.upstream_sha256:
            found.append(mode)
    return found


def _geometry_text(report: Report) -> str:
    """The draws' geometry: `native` unless the report says another (reports before the option were native)."""
    g = report.draw_geometry
    return "native" if g is None or g.sms is None else f"{g.name} ({g.sms} SMs)"


def _effective_mode_environment(report: Report, mode: str) -> Optional[dict[str, Optional[str]]]:
    """A mode's environment fields: its own record, or the top-level environment's where it has none."""
    run = (report.modes or {}).get(mode)
    own = run.environment if run is not None else None
    if own is None:
        return None
    return {f: getattr(own, f) if getattr(own, f) is not None else parent_value(report.environment, own, f)
            for f in ENVIRONMENT_FIELDS}


def _inputs_text(report: Report, mode: str) -> Optional[str]:
    run = (report.modes or {}).get(mode)
    if run is None or run.inputs is None:
        return None
    i = run.inputs
    names = {"temb_sha256": "temb", "weight_sha256": "W", "bias_sha256": "b"}
    parts = [f"{names.get(k, k[:-len('_sha256')])} {v[:8]}" for k, v in i.tensor_hashes().items()]
    return " ".join(parts + [f"grad {i.upstream_sha256[:8]}"])


def compare_mode_environments(old: Report, new: Report) -> list[ConfigDifference]:
    """Per-mode environment changes (`modes.<mode>.environment.<field>`) and seeded-input changes.

    A field is listed only where its change is not just the top-level one: a torch upgrade of the
    parent's environment shows once as `torch`, not once more for every mode that ran in it.
    """
    diffs: list[ConfigDifference] = []
    top = {"interpreter": (old.environment.interpreter, new.environment.interpreter),
           "python": (old.environment.python, new.environment.python),
           "torch": (old.environment.torch, new.environment.torch),
           "cuda": (old.environment.cuda, new.environment.cuda)}
    for mode in _ordered_union(old.modes or {}, new.modes or {}):
        a, b = _effective_mode_environment(old, mode), _effective_mode_environment(new, mode)
        if a is None or b is None:
            continue
        for f in ENVIRONMENT_FIELDS:
            if a[f] == b[f] or top.get(f) == (a[f], b[f]):
                continue
            if f == "framework_version" and (a[f], b[f]) == _framework_top_change(old, new, mode):
                continue
            diffs.append(ConfigDifference(f"modes.{mode}.environment.{f}", a[f], b[f]))
        ia, ib = _inputs_text(old, mode), _inputs_text(new, mode)
        if ia is not None and ib is not None and ia != ib:
            diffs.append(ConfigDifference(f"modes.{mode}.inputs", ia, ib,
                                          note="other seeded inputs: its numbers do not compare bit for bit"))
    return diffs


def _framework_top_change(old: Report, new: Report, mode: str) -> tuple[Optional[str], Optional[str]]:
    """The change of a mode's framework in the top-level libraries (already listed as libraries.<name>)."""
    run = (new.modes or {}).get(mode) or (old.modes or {}).get(mode)
    framework = run.environment.framework if run and run.environment else None
    if framework is None:
        return (None, None)
    return old.environment.libraries.get(framework), new.environment.libraries.get(framework)


# --- batch invariance -------------------------------------------------------------------------------


def _probe_counts(old: BatchInvariance, new: BatchInvariance) -> list[ProbeCount]:
    """Every count of every probe in metrics.PROBES, old beside new, sizes ascending."""
    counts: list[ProbeCount] = []
    for probe in metrics.PROBES:
        if isinstance(probe, metrics.FlagProbe):
            counts.append(ProbeCount(probe.name, "", probe.value(old), probe.value(new)))
            continue
        records_old, records_new = probe.records(old), probe.records(new)
        for size in _ordered_union(records_old, records_new, key=lambda k: -1 if k is None else _int_key(k)):
            a, b = records_old.get(size), records_new.get(size)
            total = metrics.lookup(b if b is not None else a, probe.total)
            for count in probe.counts:
                counts.append(ProbeCount(probe.name, probe.what(size, count), metrics.lookup(a, count.field),
                                         metrics.lookup(b, count.field), total))
    return counts


def _failing(count: ProbeCount, side: str) -> bool:
    return metrics.probe(count.probe).failing(count.new if side == "new" else count.old)


def compare_invariance(
    mode: str, candidate: str, old: Optional[BatchInvariance], new: Optional[BatchInvariance],
    counts_comparable: bool, new_is_quick: bool,
) -> Optional[Row]:
    if old is None and new is None:
        return None
    if new is None:
        return Row(mode, candidate, INVARIANCE_METRIC, None, old.batch_invariant, None, Verdict.MISSING,
                   note="NEW has no batch-invariance result")
    if old is None:
        return Row(mode, candidate, INVARIANCE_METRIC, None, None, new.batch_invariant, Verdict.NEW,
                   note="OLD had no batch-invariance result")
    counts = _probe_counts(old, new)
    was, now = old.batch_invariant, new.batch_invariant
    if was and not now:
        failing = tuple(c for c in counts if _failing(c, "new"))
        return Row(mode, candidate, INVARIANCE_METRIC, None, True, False, Verdict.WORSE,
                   note="lost batch invariance: " + _join(c.describe() for c in failing),
                   probes=failing)
    if not was and now:
        fixed = tuple(c for c in counts if _failing(c, "old"))
        if new_is_quick and not counts_comparable:
            return Row(mode, candidate, INVARIANCE_METRIC, None, False, True, Verdict.AMBIGUOUS,
                       note="invariant in NEW's quick probes only; OLD's full probes found: "
                       + _join(c.describe() for c in fixed), probes=fixed)
        return Row(mode, candidate, INVARIANCE_METRIC, None, False, True, Verdict.BETTER,
                   note="became batch-invariant; before: " + _join(c.describe() for c in fixed),
                   probes=fixed)
    if now:
        return Row(mode, candidate, INVARIANCE_METRIC, None, True, True, Verdict.SAME)
    if not counts_comparable:
        still = tuple(c for c in counts if _failing(c, "new"))
        return Row(mode, candidate, INVARIANCE_METRIC, None, False, False, Verdict.SAME,
                   note="still not invariant (counts not compared: quick vs full): "
                   + _join(f"{c.probe} {c.what}".strip() for c in still), probes=still)
    moved = tuple(c for c in counts if c.old != c.new)
    if moved:
        return Row(mode, candidate, INVARIANCE_METRIC, None, False, False, Verdict.AMBIGUOUS,
                   note="still not invariant, counts changed: " + _join(c.describe() for c in moved),
                   probes=moved)
    return Row(mode, candidate, INVARIANCE_METRIC, None, False, False, Verdict.SAME,
               note="not invariant, same counts")


# --- accuracy and latency ---------------------------------------------------------------------------


def _relative(old: float, new: float) -> Optional[float]:
    return (new - old) / old if old != 0 else None


def compare_error(old: float, new: float, thresholds: Thresholds,
                  metric: Optional[PointMetric] = None) -> tuple[Verdict, Optional[float], str]:
    """A change counts only beyond both the relative threshold and the absolute floor; lower is better
    unless `metric` says otherwise."""
    change = _relative(old, new)
    delta = abs(new - old)
    if delta <= thresholds.accuracy_floor:
        note = "" if delta == 0 else f"within the floor {thresholds.accuracy_floor:g}"
        return Verdict.SAME, change, note
    if old != 0 and delta <= thresholds.accuracy * abs(old):
        return Verdict.SAME, change, f"within {thresholds.accuracy:.0%}"
    return (Verdict.WORSE if _worse(metric, old, new) else Verdict.BETTER), change, ""


def _worse(metric: Optional[PointMetric], old: float, new: float) -> bool:
    return metric.worse(old, new) if metric is not None else new > old


def _iqr_text(d: Distribution) -> str:
    return f"[{duration(d.q1)}, {duration(d.q3)}]"


def compare_latency(
    old: float, new: float, old_dist: Optional[Distribution], new_dist: Optional[Distribution],
    thresholds: Thresholds, metric: Optional[PointMetric] = None,
) -> tuple[Verdict, Optional[float], str]:
    """A change counts when the medians move beyond the threshold and the IQRs part; lower is better
    unless `metric` says otherwise."""
    change = _relative(old, new)
    if old == new:
        return Verdict.SAME, change, ""
    if change is not None and abs(change) <= thresholds.latency:
        return Verdict.SAME, change, f"within {thresholds.latency:.0%}"
    direction = Verdict.WORSE if _worse(metric, old, new) else Verdict.BETTER
    if old_dist is None or new_dist is None:
        lacking = " and ".join(side for side, d in (("OLD", old_dist), ("NEW", new_dist)) if d is None)
        return direction, change, f"medians only: no quartiles in {lacking}"
    overlap = new_dist.q1 <= old_dist.q3 and old_dist.q1 <= new_dist.q3
    if overlap:
        return (Verdict.AMBIGUOUS, change,
                f"{'slower' if direction is Verdict.WORSE else 'faster'} beyond {thresholds.latency:.0%}"
                f" but quartiles overlap: OLD {_iqr_text(old_dist)}, NEW {_iqr_text(new_dist)}")
    return direction, change, f"quartiles apart: OLD {_iqr_text(old_dist)}, NEW {_iqr_text(new_dist)}"


def _beyond_twofold(old: float, new: float) -> bool:
    """The error more than doubled or halved: what a gradient added with atomics does not do from noise."""
    if old == 0 or new == 0:
        return old != new
    return abs(new) > 2 * abs(old) or abs(new) < abs(old) / 2


UNREPEATABLE_NOTE = ("params_repeatable false: this parameter gradient is added with atomics and moves from run to "
                     "run; shown only, counted once it doubles or halves")


def _compare_point(
    mode: str, candidate: str, t: int, old: AccuracyLatency, new: AccuracyLatency, scope: Scope,
    unrepeatable: bool = False,
) -> list[Row]:
    """`unrepeatable`: params_repeatable is false on either side, so the parameter gradients' errors are noise
    up to a factor of two."""
    thresholds = scope.thresholds
    rows: list[Row] = []
    for metric in metrics.metrics_for([old, new]):
        if metric.timed and not scope.latency:
            continue
        name, a, b = metric.name, metric.value(old), metric.value(new)
        if metric.kind is metrics.DEVICE:
            gate = gate_device_time(old, new, metric.event_metric, thresholds.latency, thresholds.latency_alpha)
            if gate is not None:  # a side without device time: its event median decides, with a note
                rows.append(Row(mode, candidate, name, t, gate.old_us, gate.new_us, Verdict(gate.verdict.value),
                                gate.change, gate.note, informational=scope.latency_basis != "device"))
            continue
        if a is None and b is None:
            continue
        if b is None:
            rows.append(Row(mode, candidate, name, t, a, None, Verdict.MISSING, note="no value in NEW"))
            continue
        if a is None:
            rows.append(Row(mode, candidate, name, t, None, b, Verdict.NEW, note="no value in OLD"))
            continue
        informational = False
        if metric.kind is metrics.LATENCY:
            verdict, change, note = compare_latency(a, b, metric.distribution(old), metric.distribution(new),
                                                    thresholds, metric)
            if scope.latency_basis == "device" and _device_time_decides(old, new, name):
                informational = True
                lead = "host-inclusive, shown only: device time decides"
                note = f"{lead}; {note}" if note else lead
        else:
            verdict, change, note = compare_error(a, b, thresholds, metric)
            if unrepeatable and name in scope.param_grads and not _beyond_twofold(a, b):
                informational = True
                note = f"{UNREPEATABLE_NOTE}; {note}" if note else UNREPEATABLE_NOTE
        rows.append(Row(mode, candidate, name, t, a, b, verdict, change, note, informational=informational))
    return rows


def _device_time_decides(old: AccuracyLatency, new: AccuracyLatency, event_metric: str) -> bool:
    """Both sides hold device time for the event metric's counterpart: then it gates, not the event median."""
    return any(m.kind is metrics.DEVICE and m.event_metric == event_metric and
               m.value(old) is not None and m.value(new) is not None for m in metrics.TIMINGS)


def compare_status(mode: str, candidate: str, status: metrics.CandidateStatus, old: CandidateResult,
                   new: CandidateResult) -> Optional[Row]:
    """A candidate's status (metrics.CANDIDATE_STATUSES): ok → failing is WORSE, with zero tolerance."""
    a, b = status.value(old), status.value(new)
    if a is None and b is None:
        return None
    if b is None:
        return Row(mode, candidate, status.name, None, a, None, Verdict.MISSING, note=f"no {status.path} in NEW")
    if a is None:
        return Row(mode, candidate, status.name, None, None, b, Verdict.NEW, note=f"no {status.path} in OLD")
    if a == b:
        return Row(mode, candidate, status.name, None, a, b, Verdict.SAME)
    failed_before, fails_now = status.failing(a), status.failing(b)
    verdict = (Verdict.WORSE if fails_now and not failed_before else
               Verdict.BETTER if failed_before and not fails_now else Verdict.AMBIGUOUS)
    return Row(mode, candidate, status.name, None, a, b, verdict)


def _sort_metric_rows(rows: list[Row], point_metrics: tuple[PointMetric, ...]) -> list[Row]:
    order = {m: i for i, m in enumerate([POINT_METRIC, *(m.name for m in point_metrics)])}
    return sorted(rows, key=lambda r: (order.get(r.metric, -1), r.t if r.t is not None else -1))


def _params_unrepeatable(entry: CandidateResult) -> bool:
    """The probes' word (params_repeatable false), or, in a run without probes, the accuracy's repeat at any size."""
    inv = entry.batch_invariance
    if inv is not None and inv.params_repeatable is False:
        return True
    return any(point.params_repeatable is False for point in entry.accuracy_latency.values())


def compare_results(
    mode: str, candidate: str, old: CandidateResult, new: CandidateResult, scope: Scope,
) -> list[Row]:
    rows: list[Row] = []
    inv = compare_invariance(mode, candidate, old.batch_invariance, new.batch_invariance,
                             scope.counts, scope.new_is_quick)
    if inv is not None:
        rows.append(inv)
    rows.extend(row for status in metrics.CANDIDATE_STATUSES
                if (row := compare_status(mode, candidate, status, old, new)) is not None)
    point_rows: list[Row] = []
    unrepeatable = _params_unrepeatable(old) or _params_unrepeatable(new)
    size = scope.size_symbol
    for key in _ordered_union(old.accuracy_latency, new.accuracy_latency, key=_int_key):
        a, b = old.accuracy_latency.get(key), new.accuracy_latency.get(key)
        t = _int_key(key)
        if a is not None and b is not None:
            point_rows.extend(_compare_point(mode, candidate, t, a, b, scope, unrepeatable))
        elif not scope.counts:
            continue  # quick runs measure fewer T: a T on one side only is expected, not a change
        elif b is None:
            point_rows.append(Row(mode, candidate, POINT_METRIC, t, "measured", None, Verdict.MISSING,
                                  note=f"{size}={t} not measured in NEW"))
        else:
            point_rows.append(Row(mode, candidate, POINT_METRIC, t, None, "measured", Verdict.NEW,
                                  note=f"{size}={t} not measured in OLD"))
    points = [*old.accuracy_latency.values(), *new.accuracy_latency.values()]
    rows.extend(_sort_metric_rows(point_rows, metrics.metrics_for(points)))
    return rows


# --- candidates and modes ---------------------------------------------------------------------------


def _entry_summary(entry: CandidateResult, size_symbol: str = "T") -> str:
    inv = entry.batch_invariance
    inv_text = "invariance not probed" if inv is None else (
        "batch-invariant" if inv.batch_invariant else "not batch-invariant")
    return f"{entry.source}; {inv_text}; {len(entry.accuracy_latency)} {size_symbol} measured"


def _reason(entry: CandidateUnavailable) -> str:
    status = f"{entry.status}: " if entry.status and entry.status != "unavailable" else ""
    return status + entry.unavailable


def compare_candidate(
    mode: str, candidate: str, old: Optional[CandidateEntry], new: Optional[CandidateEntry], scope: Scope,
) -> list[Row]:
    def availability(verdict: Verdict, a: Value, b: Value, note: str) -> list[Row]:
        return [Row(mode, candidate, AVAILABILITY_METRIC, None, a, b, verdict, note=note)]

    old_ok, new_ok = isinstance(old, CandidateResult), isinstance(new, CandidateResult)
    if old_ok and new_ok:
        return compare_results(mode, candidate, old, new, scope)
    if old_ok:
        if new is None:
            return availability(Verdict.MISSING, "available", "absent", "no longer in the report")
        return availability(Verdict.MISSING, "available", "unavailable", _reason(new))
    if new_ok:
        was = "absent" if old is None else "unavailable"
        why = "" if old is None else f" (was: {_reason(old)})"
        return availability(Verdict.NEW, was, "available", _entry_summary(new, scope.size_symbol) + why)
    # Neither side has a result: nothing was lost. Say so, with the reasons.
    a = "absent" if old is None else "unavailable"
    b = "absent" if new is None else "unavailable"
    reasons = []
    if old is not None:
        reasons.append(f"OLD: {_reason(old)}")
    if new is not None and (old is None or _reason(new) != _reason(old)):
        reasons.append(f"NEW: {_reason(new)}")
    return availability(Verdict.SAME, a, b, "; ".join(reasons))


def _has_device_time(report: Report) -> bool:
    return any(isinstance(entry, CandidateResult) and any(p.device_time for p in entry.accuracy_latency.values())
               for results in report.results.values() for entry in results.values())


def _latency_basis_note(old: Report, new: Report, basis: str) -> Optional[str]:
    """What gated the latencies, when it was not device time on both sides."""
    if basis == "events":
        return "latency gated on the host-inclusive event medians (--latency-basis events)"
    lacking = [side for side, report in (("OLD", old), ("NEW", new)) if not _has_device_time(report)]
    if lacking:
        return (f"latency gated on the host-inclusive event medians (threshold and quartiles apart): no device "
                f"time in {' and '.join(lacking)}")
    return None


def _operator_facts(report: Report) -> tuple[frozenset, str]:
    """The operator's parameter gradients, as `grad_rel_err.<key>` metrics, and its size symbol (T or S).
    The declarations import torch: read here, once a diff is to be made, not when the module loads."""
    from adaln_bench.ops.registry import all_operators

    op = all_operators().get(report.op)
    if op is None:
        return frozenset(), "T"
    grads = frozenset(metrics.GRAD_PREFIX + n for t in op.tensors if t.role == "param" for n in (t.name, t.key))
    return grads, op.family.size_symbol


def _mode_names(report: Report) -> list[str]:
    return list(dict.fromkeys([*(report.modes or {}), *report.results]))


def _incomplete_note(side: str, report: Report) -> Optional[str]:
    if not report.incomplete:
        return None
    cut = [name for name, run in (report.modes or {}).items() if run.status == "interrupted"]
    which = f" ({', '.join(cut)} interrupted)" if cut else ""
    lack = "what it lacks is shown, not counted as a regression" if side == "NEW" else \
        "what it lacks shows as NEW where the other report has it"
    return f"{side} is incomplete: its run was stopped before it finished{which}; {lack}"


def _cut_short(report: Report, row: Row) -> bool:
    """A MISSING row of an incomplete report that its interruption explains (not a crash or a failure)."""
    if row.verdict is not Verdict.MISSING or not report.incomplete:
        return False
    entry = report.results.get(row.mode, {}).get(row.candidate)
    if isinstance(entry, CandidateUnavailable):
        return entry.status == "interrupted"
    run = (report.modes or {}).get(row.mode)  # a result or none at all: lacking what its mode did not reach
    return run is not None and run.status == "interrupted"


def diff_reports(
    old: Report,
    new: Report,
    thresholds: Thresholds = Thresholds(),
    allow_different_device: bool = False,
    allow_quick_mismatch: bool = False,
    latency_basis: str = "device",
) -> ReportDiff:
    config, blockers = compare_configuration(old, new, allow_different_device, allow_quick_mismatch)
    param_grads, symbol = _operator_facts(new)
    scope = Scope(thresholds, counts=old.quick == new.quick, latency=device_kind(old) == device_kind(new),
                  new_is_quick=new.quick, latency_basis=latency_basis, param_grads=param_grads,
                  size_symbol=symbol)
    notes: list[str] = [n for n in (_incomplete_note("OLD", old), _incomplete_note("NEW", new)) if n]
    old_modes, new_modes = _mode_names(old), _mode_names(new)
    common = [m for m in old_modes if m in new_modes]
    if not common and not blockers:
        blockers.append(f"no mode in common: OLD has {', '.join(old_modes) or 'none'}, NEW has "
                        f"{', '.join(new_modes) or 'none'}")
    if blockers:
        return ReportDiff(thresholds, tuple(config), tuple(blockers), (), scope.counts, tuple(notes), symbol)
    only_old = [m for m in old_modes if m not in common]
    only_new = [m for m in new_modes if m not in common]
    if only_old or only_new:
        parts = [f"only in {side}: {', '.join(names)}" for side, names in (("OLD", only_old), ("NEW", only_new))
                 if names]
        notes.append(f"compared on the modes both reports have ({', '.join(common)}); not compared, "
                     + "; ".join(parts))
    if not scope.counts:
        notes.append("one quick and one full report: probe counts and T measured on one side only are "
                     "not compared")
    if not scope.latency:
        notes.append(f"latency not compared: {device_kind(old) or 'unknown'} and {device_kind(new) or 'unknown'}"
                     " timings come from different clocks and are never compared")
    elif (basis_note := _latency_basis_note(old, new, latency_basis)) and (_has_device_time(old)
                                                                          or _has_device_time(new)
                                                                          or latency_basis == "events"):
        notes.append(basis_note)
    rows: list[Row] = []
    for mode in common:
        old_mode, new_mode = old.results.get(mode, {}), new.results.get(mode, {})
        for candidate in _ordered_union(old_mode, new_mode):
            a, b = old_mode.get(candidate), new_mode.get(candidate)
            if mode not in new.results and isinstance(a, CandidateResult):
                rows.append(Row(mode, candidate, AVAILABILITY_METRIC, None, "available", "absent",
                                Verdict.MISSING, note=f"mode {mode} has no results in NEW" + _mode_reason(new, mode)))
                continue
            rows.extend(compare_candidate(mode, candidate, a, b, scope))
    rows = [replace(row, informational=True, note=_joined("NEW was cut short", row.note))
            if not row.informational and _cut_short(new, row) else row for row in rows]
    return ReportDiff(thresholds, tuple(config), (), tuple(rows), scope.counts, tuple(notes), symbol)


def _joined(lead: str, note: str) -> str:
    return f"{lead}; {note}" if note else lead


def _mode_reason(report: Report, mode: str) -> str:
    run = (report.modes or {}).get(mode)
    if run is None or run.status == "ok":
        return ""
    return f" ({run.status}{': ' + run.reason if run.reason else ''})"


# --- small helpers ----------------------------------------------------------------------------------


def _int_key(key: str) -> int:
    try:
        return int(key)
    except ValueError:
        return -1


def _ordered_union(a: Iterable[str], b: Iterable[str], key=None) -> list[str]:
    """Keys of a in their order, then those only in b; sorted by `key` when one is given."""
    seen = list(dict.fromkeys([*a, *b]))
    return sorted(seen, key=key) if key is not None else seen


def _join(parts: Iterable[str]) -> str:
    return "; ".join(parts) or "(no probe count changed)"
