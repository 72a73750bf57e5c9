"""Rendering a `ReportDiff` for people and machines: a rich table, Markdown for a PR comment, or JSON.

The verdicts come from the pure engine in adaln_bench.reports.diff; this module only presents them, with
numbers written by adaln_bench.datamodel.format.
"""
from __future__ import annotations

import os
import sys
from dataclasses import asdict

from adaln_bench.datamodel import format as fmt
from adaln_bench.datamodel import metrics
from adaln_bench.reports.diff import (
    AVAILABILITY_METRIC,
    INVARIANCE_METRIC,
    POINT_METRIC,
    REGRESSION_VERDICTS,
    FailOn,
    ReportDiff,
    Row,
    Value,
    Verdict,
)
from adaln_bench.datamodel.schema import Report
from adaln_bench.reports.thresholds import thresholds_as_dict

VERDICT_STYLE = {
    Verdict.SAME: "dim",
    Verdict.BETTER: "bold green",
    Verdict.WORSE: "bold red",
    Verdict.AMBIGUOUS: "yellow",
    Verdict.MISSING: "bold red",
    Verdict.NEW: "cyan",
}
VERDICT_ORDER = [Verdict.WORSE, Verdict.MISSING, Verdict.AMBIGUOUS, Verdict.BETTER, Verdict.NEW, Verdict.SAME]

Sides = dict[str, tuple[str, Report]]  # "OLD"/"NEW" -> (the argument as given, the report it named)


# --- shared formatting ------------------------------------------------------------------------------


def report_facts(report: Report) -> str:
    """kind, commit, device and quick flag: enough to tell two reports apart at a glance."""
    commit = report.tool.commit if report.tool and report.tool.commit else report.rl_kernel_commit
    dirty = report.tool.dirty if report.tool else report.tracked_tree_dirty
    parts = [report.kind]
    if commit:
        parts.append(f"commit {commit[:10]}{' (dirty)' if dirty else ''}")
    parts.append(report.environment.gpu or report.device or report.environment.device or "unknown device")
    if report.quick:
        parts.append("quick")
    return ", ".join(parts)


def format_value(metric: str, value: Value) -> str:
    if value is None:
        return fmt.MISSING
    if metric == INVARIANCE_METRIC:
        return "invariant" if value else "NOT invariant"
    if isinstance(value, str):
        return value
    point = metrics.point_metric(metric)
    if point is not None and isinstance(value, (int, float)) and not isinstance(value, bool):
        return point.kind.detail(value)
    return str(value)


def format_change(row: Row) -> str:
    return fmt.change(row.change)


def format_t(row: Row) -> str:
    return "" if row.t is None else str(row.t)


def thresholds_text(t) -> str:
    return (f"latency {t.latency:.0%} and significant (device time: U test at alpha {t.latency_alpha:g}; "
            f"event medians: quartiles apart), accuracy {t.accuracy:.0%} (floor {t.accuracy_floor:g})")


def headline(result: ReportDiff, fail_on: FailOn, code: int) -> str:
    if not result.comparable:
        return "not comparable: " + "; ".join(result.not_comparable)
    regressions = len(result.regressions)
    counts = result.verdict_counts()
    tally = ", ".join(f"{counts[v.value]} {v.value}" for v in VERDICT_ORDER if counts[v.value])
    if regressions:
        what = f"{regressions} regression{'s' if regressions != 1 else ''}"
    elif result.changes and code == 1:
        what = f"{len(result.changes)} change{'s' if len(result.changes) != 1 else ''} (--fail-on any-change)"
    elif result.changes:
        what = "no regression"
    else:
        what = "no change"
    ignored = " (ignored: --fail-on never)" if regressions and fail_on is FailOn.never else ""
    gated = len(result.rows) - result.informational_count
    shown = (f"; {result.informational_count} rows shown only ({informational_kinds(result)})"
             if result.informational_count else "")
    return f"{what}{ignored}; {gated} compared: {tally or 'nothing'}{shown}"


INFORMATIONAL_KINDS = (("host-inclusive", "host-inclusive times where device time decides"),
                       ("params_repeatable false", "parameter gradients added with atomics, within twofold"),
                       ("NEW was cut short", "what the incomplete NEW did not reach"))


def informational_kinds(result: ReportDiff, changed_only: bool = False) -> str:
    """Why the informational rows count for nothing, in the words of their notes."""
    rows = [r for r in result.rows if r.informational and (not changed_only or r.verdict is not Verdict.SAME)]
    kinds = [text for mark, text in INFORMATIONAL_KINDS if any(r.note.startswith(mark) for r in rows)]
    return "; ".join(kinds) or "shown only"


def hidden_line(result: ReportDiff) -> str:
    n = result.hidden_informational
    return (f"{n} informational row{'s' if n != 1 else ''} not listed (changed, but counting for nothing: "
            f"{informational_kinds(result, changed_only=True)}): --all lists them")


def summary_rows(result: ReportDiff) -> list[tuple[str, str, str, dict[str, int], Verdict]]:
    """Per (mode, candidate): invariance old → new, verdict counts, and the worst verdict."""
    groups: dict[tuple[str, str], list[Row]] = {}
    for row in result.rows:
        if not row.informational:
            groups.setdefault((row.mode, row.candidate), []).append(row)
    out = []
    for (mode, candidate), rows in groups.items():
        counts = {v.value: 0 for v in Verdict}
        for row in rows:
            counts[row.verdict.value] += 1
        worst = next(v for v in VERDICT_ORDER if counts[v.value])
        inv = next((r for r in rows if r.metric == INVARIANCE_METRIC), None)
        avail = next((r for r in rows if r.metric == AVAILABILITY_METRIC), None)
        if inv is not None:
            invariance = f"{_inv_word(inv.old)} → {_inv_word(inv.new)}" if inv.old != inv.new else _inv_word(inv.new)
        elif avail is not None:
            invariance = f"{avail.old} → {avail.new}" if avail.old != avail.new else str(avail.new)
        else:
            invariance = "—"
        out.append((mode, candidate, invariance, counts, worst))
    return out


def _inv_word(value: Value) -> str:
    return "—" if value is None else ("yes" if value else "NO")


def _metric_label(row: Row) -> str:
    return "T measured" if row.metric == POINT_METRIC else row.metric


# --- rich -------------------------------------------------------------------------------------------


def render_rich(result: ReportDiff, sides: Sides, fail_on: FailOn, code: int,
                show_all: bool) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table
    from rich.text import Text

    width = None if sys.stdout.isatty() or os.environ.get("COLUMNS") else 160
    console = Console(width=width, highlight=False)
    for label, (arg, report) in sides.items():
        console.print(f"[bold]{label}[/]: {escape(arg)} ({escape(report_facts(report))})")
    t = result.thresholds
    console.print(f"thresholds: {thresholds_text(t)}; fail on {fail_on.value}")
    for note in result.notes:  # at the top: an incomplete side is the first thing to know
        console.print(f"[yellow]note:[/] {escape(note)}")

    if result.config:
        table = Table(title="Configuration differences", title_justify="left")
        for col in ("field", "OLD", "NEW", "note"):
            table.add_column(col)
        for d in result.config:
            note = Text.assemble(("not comparable " if d.blocks else "", "bold red"), d.note)
            table.add_row(Text(d.field), Text(fmt.plain(d.old)), Text(fmt.plain(d.new)), note)
        console.print(table)
    else:
        console.print("configuration: identical")

    if result.comparable:
        # The verdict counts share one column that folds: one column per verdict squeezed the headers to
        # `candid…` at 80 columns. No header is narrower than its name.
        summary = Table(title="Per candidate", title_justify="left")
        for col in ("mode", "candidate", "invariant", "rows"):
            summary.add_column(col, min_width=len(col), overflow="fold")
        summary.add_column("verdict", min_width=len("AMBIGUOUS"), no_wrap=True)
        for mode, candidate, invariance, counts, worst in summary_rows(result):
            tally = ", ".join(f"{counts[v.value]} {v.value}" for v in VERDICT_ORDER if counts[v.value])
            summary.add_row(Text(mode), Text(candidate), Text(invariance), Text(tally),
                            Text(worst.value, style=VERDICT_STYLE[worst]))
        console.print(summary)

        rows = list(result.rows) if show_all else result.listed
        if rows:
            # The note (which probe failed, why a result is missing) is what a reader needs most, so it
            # sits under the row's name, where it folds on a narrow terminal, instead of in a last column
            # that a narrow terminal squeezes to nothing.
            table = Table(title="All rows" if show_all else "Changes", title_justify="left", show_lines=True)
            table.add_column("verdict", no_wrap=True)
            table.add_column("mode / candidate / metric", ratio=1, overflow="fold")
            for col in ("OLD", "NEW", "change"):
                table.add_column(col, justify="right")
            for row in rows:
                where = Text.assemble((f"{row.mode} / {row.candidate}", "bold"), f"  {_metric_label(row)}",
                                      f" {result.size_symbol}={row.t}" if row.t is not None else "")
                if row.note:
                    where.append("\n" + row.note, style="dim" if row.verdict is Verdict.SAME else "")
                verdict = (Text(f"({row.verdict.value})", style="dim") if row.informational
                           else Text(row.verdict.value, style=VERDICT_STYLE[row.verdict]))
                table.add_row(verdict, where,
                              Text(format_value(row.metric, row.old)), Text(format_value(row.metric, row.new)),
                              format_change(row))
            console.print(table)
        if not show_all and result.hidden_informational:
            console.print(hidden_line(result))

    style = "bold red" if code else "bold green"
    console.print(Text(f"{headline(result, fail_on, code)} → exit {code}", style=style))


# --- markdown ---------------------------------------------------------------------------------------


def _md_verdict(v: Verdict) -> str:
    return f"**{v.value}**" if v in REGRESSION_VERDICTS else v.value


def render_markdown(result: ReportDiff, sides: Sides, fail_on: FailOn, code: int,
                    show_all: bool) -> str:
    mark = "❌" if code == 1 else ("⚠️" if code == 3 else "✅")
    out = [f"## adaln-bench diff {mark} {fmt.markdown_cell(headline(result, fail_on, code))} (exit {code})", ""]
    for label, (arg, report) in sides.items():
        out.append(f"- **{label}**: `{fmt.markdown_cell(arg).replace('`', chr(39))}` "
                   f"({fmt.markdown_cell(report_facts(report))})")
    t = result.thresholds
    out += [f"- thresholds: {thresholds_text(t)}; fail on {fail_on.value}", ""]
    for note in result.notes:  # at the top: an incomplete side is the first thing to know
        out += [f"> {fmt.markdown_cell(note)}", ""]

    out.append("### Configuration differences")
    out.append("")
    if result.config:
        out += fmt.markdown_table(["field", "OLD", "NEW", "note"],
                         [[d.field, fmt.plain(d.old), fmt.plain(d.new),
                           ("**not comparable** " if d.blocks else "") + d.note] for d in result.config])
    else:
        out.append("None: same GPU, software and settings.")
    out.append("")
    if not result.comparable:
        out += ["### Not comparable", ""] + [f"- {fmt.markdown_cell(reason)}" for reason in result.not_comparable] + [""]
        return "\n".join(out)

    rows = list(result.rows) if show_all else result.listed
    out += ["### All rows" if show_all else "### Changes", ""]
    if rows:
        out += fmt.markdown_table(
            ["mode", "candidate", "metric", result.size_symbol, "OLD", "NEW", "change", "verdict", "note"],
            [[r.mode, r.candidate, _metric_label(r), format_t(r), format_value(r.metric, r.old),
              format_value(r.metric, r.new), format_change(r),
              f"({r.verdict.value})" if r.informational else _md_verdict(r.verdict), r.note] for r in rows])
    else:
        out.append("No counting row changed." if result.hidden_informational else "Every row is SAME.")
    if not show_all and result.hidden_informational:
        out += ["", hidden_line(result)]
    out.append("")

    shown = [v for v in VERDICT_ORDER if any(r.verdict is v for r in result.rows)]
    out += ["<details><summary>Per candidate</summary>", ""]
    out += fmt.markdown_table(["mode", "candidate", "invariant", *[v.value for v in shown], "verdict"],
                     [[m, c, inv, *[str(counts[v.value] or "") for v in shown], _md_verdict(worst)]
                      for m, c, inv, counts, worst in summary_rows(result)])
    out += ["", "</details>", ""]
    return "\n".join(out)


# --- json -------------------------------------------------------------------------------------------


def _side_json(arg: str, report: Report) -> dict:
    commit = report.tool.commit if report.tool and report.tool.commit else report.rl_kernel_commit
    return {"source": arg, "kind": report.kind, "commit": commit, "gpu": report.environment.gpu,
            "quick": report.quick}


def _row_json(row: Row) -> dict:
    data = asdict(row)
    data["verdict"] = row.verdict.value
    data["regression"] = row.regression
    return data


def diff_to_json(result: ReportDiff, sides: Sides, fail_on: FailOn, code: int) -> dict:
    return {
        "old": _side_json(*sides["OLD"]),
        "new": _side_json(*sides["NEW"]),
        "thresholds": thresholds_as_dict(result.thresholds),
        "fail_on": fail_on.value,
        "comparable": result.comparable,
        "not_comparable": list(result.not_comparable),
        "invariance_counts_compared": result.invariance_counts_compared,
        "size_symbol": result.size_symbol,  # what each row's `t` counts: T timesteps or S tokens
        "config": [asdict(d) for d in result.config],
        "notes": list(result.notes),
        "counts": result.verdict_counts(),
        "regressions": len(result.regressions),
        "rows": [_row_json(row) for row in result.rows],
        "exit_code": code,
    }
