"""`adaln-bench publish RESULTS... --out SITE/`: a static site of the history of reports. Arguments only:
the site is built by adaln_bench.reports.site.build."""
from __future__ import annotations

from pathlib import Path
from typing import List

import typer

from adaln_bench.reports.site.build import build_site
from adaln_bench.reports.site.collect import skipped_counts


def publish_command(
    results: List[Path] = typer.Argument(
        ..., metavar="RESULTS...", help="Report files, or folders searched recursively for *.json reports."),
    out: Path = typer.Option(..., "--out", metavar="SITE", help="The site's directory: new, empty, or an "
                             "earlier site (replaced whole)."),
) -> None:
    """Build a static site (offline: no server, nothing fetched) of the history of reports: per operator, a
    matrix of mode × candidate with today's verdict, device-time ratio and worst errors, and a page of
    series over commits with steps marked where they pass the series' own noise. JSON files that are not
    reports are skipped and counted. Needs matplotlib (the plot extra of adaln-bench).

    Exit codes: 0 written; 2 bad input (no reports found, --out not writable or not an earlier site).
    """
    built = build_site(results, out)
    skipped = skipped_counts(built.not_reports, built.run_indexes, built.duplicates,
                             not_reports_as="non-report JSON")
    typer.echo(f"wrote {built.out}/index.html: {built.reports} reports, {built.series} series, {built.steps} "
               f"latency steps, {built.diffs} diffs" + (f" (skipped {', '.join(skipped)})" if skipped else ""))
