"""Build the site: read the reports, analyse every series, render the pages, plots and diffs into a
temporary directory beside --out, then rename it into place (a reader never sees half a site)."""
from __future__ import annotations

import fcntl
import json
import os
import shutil
import tempfile
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Iterable, Iterator, Optional

from adaln_bench.errors import UserError
from adaln_bench.datamodel.io import current_umask
from adaln_bench.reports.site import diffs, pages, plots
from adaln_bench.reports.site.collect import SITE_MARKER, Collected, Loaded, collect
from adaln_bench.reports.site.history import SeriesHistory, analyse
from adaln_bench.reports.site.series import GroupKey, group_series
from adaln_bench.reports.site.summary import summary_html, summary_rows
from adaln_bench.reports.thresholds import Thresholds

# Written into every site: --out may replace a directory only when it holds this file (an earlier site).
MARKER = SITE_MARKER


@dataclass(frozen=True)
class Built:
    out: Path
    reports: int
    not_reports: int
    run_indexes: int
    duplicates: int
    series: int
    steps: int
    diffs: int


def check_out(out: Path) -> None:
    """--out must be a new path or an earlier site, in a directory that can be written; not the current
    directory or one above it, which the site's rename into place would have to move away."""
    try:
        here, target = Path.cwd().resolve(), out.resolve()
    except (OSError, RuntimeError) as exc:  # a vanished working directory, a symlink loop
        raise UserError(f"{out}: cannot resolve: {exc}") from None
    if out.name in ("", ".", "..") or target == here or target in here.parents:
        raise UserError(f"{out}: the site's directory cannot be the current directory or one above it; "
                        "name a directory of its own (e.g. --out site)")
    if out.exists() and not out.is_dir():
        raise UserError(f"{out}: exists and is not a directory")
    if out.is_dir() and any(out.iterdir()) and not (out / MARKER).is_file():
        raise UserError(f"{out}: exists and is not a site written by publish (no {MARKER}); "
                        "choose a new or empty directory")
    probe = out.parent if out.parent != Path("") else Path(".")
    while not probe.exists():
        probe = probe.parent
    if not probe.is_dir() or not os.access(probe, os.W_OK | os.X_OK):
        raise UserError(f"{out}: cannot write there ({probe} is not a writable directory)")


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def _group_json(group: GroupKey, histories: list[SeriesHistory]) -> dict:
    return {
        "op": group.op, "gpu": group.gpu, "shape": group.shape, "quick": group.quick, "draw": group.draw,
        "slug": group.slug, "label": group.label,
        "series": [{
            "mode": h.series.mode, "candidate": h.series.candidate, "column": h.series.column,
            "points": [{"commit": p.commit, "date": p.date, "report": p.loaded.site_name, "verdict": p.verdict}
                       for p in h.series.points],
            "latency_steps": [asdict(m) for m in h.latency_steps()],
            "error_changes": [asdict(m) for m in h.error_changes],
            "verdict_changes": [asdict(m) for m in h.verdict_changes],
            "summary": {"verdict": h.summary.verdict, "trend": h.summary.trend,
                        "headline_t": h.summary.headline_t,
                        "latency": None if h.summary.latency is None else
                        {"basis": h.summary.latency.basis, "metric": h.summary.latency.metric,
                         "value": h.summary.latency.value},
                        "fwd_err": h.summary.fwd_err, "grad_err": h.summary.grad_err},
        } for h in histories],
    }


def render_site(collected: Collected, root: Path, thresholds: Thresholds) -> Built:
    """Every file of the site under `root` (an empty directory)."""
    (root / "reports").mkdir()
    (root / "diffs").mkdir()
    (root / "op").mkdir()
    for loaded in collected.reports:
        (root / "reports" / loaded.site_name).write_bytes(loaded.data)

    ops: dict[str, dict[GroupKey, list[SeriesHistory]]] = {}
    for group, series in group_series(collected.reports).items():
        ops.setdefault(group.op, {})[group] = [analyse(s, thresholds) for s in series]
    ops = dict(sorted(ops.items()))

    pairs: dict[str, tuple[Loaded, Loaded]] = {}
    for groups in ops.values():
        for histories in groups.values():
            for h in histories:
                pts = h.series.points
                for a, b in zip(pts, pts[1:]):
                    pairs.setdefault(diffs.diff_name(a.loaded, b.loaded), (a.loaded, b.loaded))
    for name, (old, new) in pairs.items():
        md, code = diffs.diff_markdown(old, new)
        _write(root / "diffs" / f"{name}.md", md)
        title = f"diff {old.site_name} → {new.site_name} (exit {code})"
        _write(root / "diffs" / f"{name}.html", pages.diff_page(title, diffs.markdown_html(md), f"{name}.md"))

    links = pages.Links("../")
    steps = 0
    for op, groups in ops.items():
        sections = []
        for group, histories in groups.items():
            parts = []
            for h in histories:
                if pages.always_unavailable(h):
                    continue
                key = pages.anchor(group, h)
                pts = h.series.points

                def diff_of(i: int, pts=pts) -> Optional[str]:
                    return diffs.diff_name(pts[i - 1].loaded, pts[i].loaded) if i > 0 else None

                def link(i: int, pts=pts, diff_of=diff_of) -> str:
                    name = diff_of(i)
                    return links.diff(name) if name else links.report(pts[i].loaded)

                svg = plots.series_svg(h, link, prefix=f"{key}-", thresholds=thresholds)
                parts.append(pages.series_section(group, h, links, svg, diff_of))
                steps += len(h.latency_steps())
            parts.append(pages.unavailable_list(group, [h for h in histories if pages.always_unavailable(h)], links))
            sections.append((group, parts))
        _write(root / "op" / pages.op_file(op), pages.op_page(op, sections))

    index_links = pages.Links("")
    lead = summary_html(summary_rows(ops), index_links)
    _write(root / "index.html", pages.index_page(ops, collected, index_links, lead))
    summary = {
        "reports": [{"name": l.site_name, "source": str(l.path), "sha256": l.sha256} for l in collected.reports],
        "skipped": {"not_reports": len(collected.not_reports), "run_indexes": collected.run_indexes,
                    "duplicates": collected.duplicates, "incomplete": collected.incomplete},
        "groups": [_group_json(g, hs) for groups in ops.values() for g, hs in groups.items()],
    }
    _write(root / "site.json", json.dumps(summary, indent=1, allow_nan=False) + "\n")
    _write(root / MARKER, "written by adaln-bench publish; --out may replace this directory\n")
    n_series = sum(len(hs) for groups in ops.values() for hs in groups.values())
    return Built(root, len(collected.reports), len(collected.not_reports), collected.run_indexes,
                 collected.duplicates, n_series, steps, len(pairs))


@contextmanager
def _directory_lock(directory: Path) -> Iterator[None]:
    """An exclusive flock on `directory` itself (no lock file left behind), released on leaving."""
    fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def build_site(inputs: Iterable[Path], out: Path, thresholds: Thresholds = Thresholds()) -> Built:
    inputs = list(inputs)
    plots.require_matplotlib()
    check_out(out)
    collected = collect(inputs)
    if not collected.reports:
        skipped = f" ({len(collected.not_reports)} JSON files were not reports)" if collected.not_reports else ""
        raise UserError(f"no reports found in {', '.join(str(p) for p in inputs)}{skipped}")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent))
    except OSError as exc:
        raise UserError(f"{out}: cannot write: {exc.strerror or exc}") from None
    try:
        built = render_site(collected, tmp, thresholds)
        tmp.chmod(0o777 & ~current_umask())
        with _directory_lock(out.parent):  # two publishes to one --out: one swaps its site in, then the other
            check_out(out)  # the other may have left something there that is no site
            old: Optional[Path] = None
            if out.exists():
                old = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".old", dir=out.parent))
                os.rename(out, old / "site")
            try:
                os.rename(tmp, out)
            except OSError:
                if old is not None:  # put the earlier site back: --out is never left without one
                    os.rename(old / "site", out)
                raise
            finally:
                if old is not None:
                    shutil.rmtree(old, ignore_errors=True)
    except OSError as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        raise UserError(f"{out}: cannot write: {exc.strerror or exc}") from None
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return Built(out, *(getattr(built, f) for f in ("reports", "not_reports", "run_indexes", "duplicates",
                                                    "series", "steps", "diffs")))
