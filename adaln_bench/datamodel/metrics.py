"""The one table of what a report holds: every probe count and metric, where it lives, how it reads.

`diff` (verdicts), `render` (the `report` table), `plot` (panels and the invariance matrix) and the probes'
result builder (`batch_invariant`) all read these tables and list no field by hand. Adding a probe or a
metric is one entry here, plus its field in `datamodel/schema.py` and the code that measures it.

Three kinds of entry, by where they live in a candidate's result (see docs/spec.md#9-the-report):

- `PROBES`, under `batch_invariance`: a `CountProbe` counts rows or batches that differ (exact: any count
  above 0 makes the candidate not batch-invariant, and a diff allows no tolerance); a `FlagProbe` passes or
  fails (`params_repeatable`).
- `POINT_METRICS`, under `accuracy_latency.<T>`: one number per T, judged against a threshold in a diff.
- `CANDIDATE_STATUSES`, directly under the candidate's result: a status such as `ok`; any other value is a
  failure of the candidate (shown in red, and a regression in a diff when it was `ok` before).

Values are looked up by path, through pydantic fields or, for a field a newer writer added that the schema
does not know yet, through the extra keys pydantic keeps: an entry works before its schema field exists.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Iterable, Literal, Optional, Sequence, Union

from adaln_bench.datamodel import format as fmt
from adaln_bench.datamodel.schema import AccuracyLatency, BatchInvariance, CandidateResult, Distribution

Better = Literal["lower", "higher"]

INVARIANT = "batch_invariant"  # the verdict all probes make together, a diff row of its own
INVARIANT_COLUMN = "invariant"  # its column in the plot's matrix, always the last


def lookup(obj: Any, path: str) -> Any:
    """The value at a dotted path through models and dicts; None where any step is missing."""
    for part in path.split("."):
        if obj is None:
            return None
        obj = obj.get(part) if isinstance(obj, dict) else getattr(obj, part, None)
    return obj


class _Field:
    """An entry whose value is the field `name` of its parent record, found at `PARENT.name` in the report."""

    PARENT: ClassVar[str]
    name: str

    @property
    def path(self) -> str:
        return f"{self.PARENT}.{self.name}"

    def value(self, parent: Any) -> Any:
        return lookup(parent, self.name)


# --- metrics per T ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Kind:
    """What a point metric measures, which decides its comparison in a diff and how it is written."""

    # latency: threshold and quartiles (host-inclusive event medians); device: threshold and a U test over
    # every sample (reports/latency_gate.py); error: threshold and floor
    name: Literal["latency", "device", "error"]
    axis_label: str
    detail: Callable[[float], str]  # a diff row
    brief: Callable[[float], str]  # a cell of the `report` table
    axis: Callable[[float], str]  # a plot's tick label


LATENCY = Kind("latency", "median time per call", lambda v: fmt.duration(v, fmt.DETAIL),
               lambda v: fmt.duration(v, fmt.BRIEF), lambda v: fmt.duration(v, fmt.AXIS))
DEVICE = Kind("device", "device time per call", LATENCY.detail, LATENCY.brief, LATENCY.axis)
ERROR = Kind("error", "max |y − ref| / max |ref|", fmt.error,
             lambda v: fmt.error(v, 1, short_zero=False), fmt.axis_error)


@dataclass(frozen=True)
class PointMetric(_Field):
    """One number per T: `name` is its path below `accuracy_latency.<T>` and its name in a diff."""

    PARENT = "accuracy_latency.<T>"

    name: str
    kind: Kind
    title: str
    better: Better = "lower"
    dist: Optional[str] = None  # path of the distribution kept beside it (latencies)
    plot: bool = False  # drawn in a panel of its own
    summary: Optional[str] = None  # the `report` column it feeds: the worst value of that column's metrics
    # Device time: the event-median metric it stands beside (a diff gates one or the other, never both).
    event_metric: Optional[str] = None
    exact = False

    @property
    def timed(self) -> bool:
        """A time (events or device): compared only between runs on the same kind of device."""
        return self.kind is LATENCY or self.kind is DEVICE

    def distribution(self, point: AccuracyLatency) -> Optional[Distribution]:
        found = lookup(point, self.dist) if self.dist else None
        return Distribution.model_validate(found) if isinstance(found, dict) else found

    def worse(self, old: float, new: float) -> bool:
        return new > old if self.better == "lower" else new < old

    def worst(self, values: list[float]) -> float:
        return max(values) if self.better == "lower" else min(values)


FWD_ERR = PointMetric("fwd_rel_err", ERROR, "Forward error vs FP64", plot=True, summary="fwd err")
TIMINGS: tuple[PointMetric, ...] = (
    PointMetric("fwd_us", LATENCY, "Forward latency", dist="fwd_us_dist", plot=True),
    PointMetric("fwd_bwd_us", LATENCY, "Forward + backward latency", dist="fwd_bwd_us_dist", plot=True,
                summary="fwd+bwd"),
    PointMetric("device_time.fwd_us", DEVICE, "Forward device time", event_metric="fwd_us"),
    PointMetric("device_time.fwd_bwd_us", DEVICE, "Forward + backward device time", event_metric="fwd_bwd_us"),
)
# A gradient's error is labelled by its tensor's name: a weight's dW, a bias's db, any other d_<name>.
GRAD_LABELS = {"w": "dW", "b": "db"}
GRAD_PREFIX = "grad_rel_err."
GRAD_SUMMARY = "grad err"


def grad_metric(name: str, plot: bool = False) -> PointMetric:
    label = GRAD_LABELS.get(name, f"d_{name}")
    return PointMetric(GRAD_PREFIX + name, ERROR, f"{label} error vs FP64", plot=plot, summary=GRAD_SUMMARY)


# The metrics per size that every operator has. The gradients' errors are an operator's own (its declared
# gradients, the keys of its grad_rel_err): `point_metrics` and `metrics_for` put them after the forward error.
POINT_METRICS: tuple[PointMetric, ...] = (FWD_ERR, *TIMINGS)


def point_metrics(grads: Sequence[str], plotted: Optional[Sequence[str]] = None) -> tuple[PointMetric, ...]:
    """Every metric per size for an operator whose gradients are `grads` (in order): the forward error, one
    error per gradient, the times. `plotted`: the gradients drawn in a panel of their own (default: the
    first two)."""
    drawn = set(grads[:2] if plotted is None else plotted)
    return (*POINT_METRICS[:1], *(grad_metric(g, g in drawn) for g in grads), *POINT_METRICS[1:])


def grads_in(points: Iterable[Optional[AccuracyLatency]]) -> list[str]:
    """The gradients the points hold errors for, in the order they first appear."""
    names: dict[str, None] = {}
    for point in points:
        if point is not None and point.grad_rel_err is not None:
            names.update(dict.fromkeys(point.grad_rel_err.errors()))
    return list(names)


def metrics_for(points: Iterable[Optional[AccuracyLatency]]) -> tuple[PointMetric, ...]:
    """The point metrics of what these points hold: the gradients they hold errors for, in order."""
    return point_metrics(grads_in(points))


def point_metric(name: str) -> Optional[PointMetric]:
    if name.startswith(GRAD_PREFIX):
        return grad_metric(name[len(GRAD_PREFIX):])
    return next((m for m in POINT_METRICS if m.name == name), None)


def summary_columns() -> list[str]:
    """The `report` table's columns per T, in table order (the gradients' one after the forward error's)."""
    return list(dict.fromkeys(m.summary for m in point_metrics(("any",)) if m.summary))


def summary_cells(point: Optional[AccuracyLatency]) -> list[str]:
    """One cell per summary column: the worst value of its metrics at this T, or a dash."""
    cells = []
    present = metrics_for([point])
    for column in summary_columns():
        members = [m for m in present if m.summary == column]
        values = [] if point is None else [v for m in members if (v := m.value(point)) is not None]
        cells.append(members[0].kind.brief(members[0].worst(values)) if values else fmt.MISSING)
    return cells


# --- batch-invariance probes ------------------------------------------------------------------------


@dataclass(frozen=True)
class Count:
    """One count of a probe: `field` in its record, `short` in the `report` table, the plot `column` it adds to."""

    field: str
    short: str
    column: str


Record = Any  # a probe's record: a schema model, or a dict for a field the schema does not know yet


@dataclass(frozen=True)
class CountProbe:
    """A probe that counts what differs; its counts are out of the record's `total` field."""

    name: str  # key under batch_invariance
    label: str  # in the `report` table; {size} is the size for a probe run at several sizes
    counts: tuple[Count, ...]
    total: str
    per_size: bool = False  # one record per size n, keyed by n
    exact = True

    @property
    def path(self) -> str:
        return f"batch_invariance.{self.name}" + (".<n>" if self.per_size else "")

    def records(self, inv: BatchInvariance) -> dict[Optional[str], Record]:
        """The probe's records by size (None for a probe run once); empty when the probe did not run."""
        found = lookup(inv, self.name)
        if found is None:
            return {}
        return dict(found) if self.per_size else {None: found}

    def what(self, size: Optional[str], count: Count) -> str:
        """The count's name in a diff: `n=257 fwd_differ`, or `fwd_differ`."""
        return count.field if size is None else f"n={size} {count.field}"

    def title(self, size: Optional[str]) -> str:
        return self.label.format(size=size)

    @staticmethod
    def failing(value: Any) -> bool:
        return isinstance(value, int) and not isinstance(value, bool) and value > 0


@dataclass(frozen=True)
class FlagProbe(_Field):
    """A probe that passes or fails: `failure` is what the `report` table says when it fails."""

    name: str
    failure: str
    column: str
    PARENT = "batch_invariance"
    exact = True

    @staticmethod
    def failing(value: Any) -> bool:
        return value is False


Probe = Union[CountProbe, FlagProbe]

FWD = Count("fwd_differ", "fwd", "fwd rows")
ROWGRAD = Count("rowgrad_differ", "rowgrad", "d_temb rows")

# In the order of the schema; the `report` table and the plot list the counting probes first, then the flags.
PROBES: tuple[Probe, ...] = (
    CountProbe("all_rows", "all_rows[{size}]", (FWD, ROWGRAD), total="rows", per_size=True),
    FlagProbe("params_repeatable", "dW/db not repeatable", "params"),
    CountProbe("full_vs_sub_batches", "sub_batches",
               (Count("fwd_differ", "fwd", "sub-batches"), Count("rowgrad_differ", "rowgrad", "sub-batches")),
               total="sub_batches"),
    CountProbe("batch_size_sweep", "sweep", (Count("differ", "", "sweep"),), total="comparisons"),
    CountProbe("random_rows", "random_rows",
               (Count("fwd_differ", "fwd", "random rows"), Count("rowgrad_differ", "rowgrad", "random rows")),
               total="comparisons"),
)


def probe(name: str) -> Probe:
    return next(p for p in PROBES if p.name == name)


def count_probes() -> list[CountProbe]:
    return [p for p in PROBES if isinstance(p, CountProbe)]


def flag_probes() -> list[FlagProbe]:
    return [p for p in PROBES if isinstance(p, FlagProbe)]


def probes_pass(inv: BatchInvariance) -> bool:
    """Every count of every probe that ran is 0 and every flag holds: the `batch_invariant` verdict."""
    for p in count_probes():
        for record in p.records(inv).values():
            if any(p.failing(lookup(record, c.field)) for c in p.counts):
                return False
    return not any(p.failing(p.value(inv)) for p in flag_probes())


def probe_failures(inv: BatchInvariance) -> list[str]:
    """What failed, as the `report` table says it: `all_rows[257] fwd 0/771, rowgrad 12/771`."""
    parts = []
    for p in count_probes():
        for size, record in p.records(inv).items():
            values = [lookup(record, c.field) for c in p.counts]
            if any(p.failing(v) for v in values):
                total = lookup(record, p.total)
                parts.append(p.title(size) + " " + ", ".join(
                    f"{c.short} {v}/{total}".strip() for c, v in zip(p.counts, values)))
    parts += [p.failure for p in flag_probes() if p.failing(p.value(inv))]
    return parts


# --- statuses of a candidate ------------------------------------------------------------------------


@dataclass(frozen=True)
class CandidateStatus:
    """A status under the candidate's result (e.g. `cold_start.status`); a value outside `ok` is a failure."""

    name: str  # its name in a diff
    path: str  # below results.<mode>.<candidate>
    column: str  # its column in the plot's matrix
    ok: tuple[str, ...] = ("ok",)
    exact = True

    def value(self, result: CandidateResult) -> Optional[str]:
        return lookup(result, self.path)

    def failing(self, value: Optional[str]) -> bool:
        return value is not None and value not in self.ok


CANDIDATE_STATUSES: tuple[CandidateStatus, ...] = (
    CandidateStatus("cold_start", "cold_start.status", "cold start"),
)


def candidate_failures(result: CandidateResult) -> list[str]:
    """The statuses that fail, as `cold_start crashed`."""
    return [f"{s.name} {v}" for s in CANDIDATE_STATUSES if s.failing(v := s.value(result))]


def matrix_columns() -> list[str]:
    """The plot's invariance matrix: count columns, then flags, then candidate statuses, then the verdict."""
    columns = [c.column for p in count_probes() for c in p.counts]
    columns += [p.column for p in flag_probes()] + [s.column for s in CANDIDATE_STATUSES] + [INVARIANT_COLUMN]
    return list(dict.fromkeys(columns))
