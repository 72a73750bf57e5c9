"""The diff between neighbouring points of a series: the diff engine's verdicts, its Markdown renderer's
text, written as SITE/diffs/<old>--<new>.md and as an HTML page around the same text."""
from __future__ import annotations

import html
import re

from adaln_bench.reports.diff import FailOn, diff_reports, exit_code
from adaln_bench.reports.diff_render import render_markdown
from adaln_bench.reports.site.collect import Loaded


def diff_name(old: Loaded, new: Loaded) -> str:
    return f"{old.sha256[:10]}--{new.sha256[:10]}"


def diff_markdown(old: Loaded, new: Loaded) -> tuple[str, int]:
    """The Markdown of `adaln-bench diff OLD NEW --markdown`, and its exit code."""
    result = diff_reports(old.report, new.report)
    code = exit_code(result, FailOn.regression)
    sides = {"OLD": (old.site_name, old.report), "NEW": (new.site_name, new.report)}
    return render_markdown(result, sides, FailOn.regression, code, show_all=False), code


def _inline(text: str) -> str:
    """Escaped text with the renderer's inline marks: **bold** and `code`."""
    out = html.escape(html.unescape(text), quote=False)  # the Markdown's own escapes, then the page's
    out = re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", out)
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", out)


def _cells(line: str) -> list[str]:
    inner = line.strip()[1:-1]
    parts = re.split(r"(?<!\\)\|", inner)
    return [p.strip().replace("\\|", "|") for p in parts]


# The renderer's verdict marks, as characters every font has (a browser without an emoji font shows boxes).
MARKS = {"✅": "✓", "❌": "✗", "⚠️": "⚠"}


def markdown_html(md: str) -> str:
    """HTML for the subset of Markdown the diff renderer writes: headings, lists, quotes, tables, details."""
    for mark, plain in MARKS.items():
        md = md.replace(mark, plain)
    out: list[str] = []
    lines = md.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("|"):
            table = []
            while i < len(lines) and lines[i].startswith("|"):
                table.append(lines[i])
                i += 1
            head, body = _cells(table[0]), [_cells(r) for r in table[2:]]
            out.append("<table><thead><tr>" + "".join(f"<th>{_inline(c)}</th>" for c in head) + "</tr></thead><tbody>")
            out += ["<tr>" + "".join(f"<td>{_inline(c)}</td>" for c in row) + "</tr>" for row in body]
            out.append("</tbody></table>")
            continue
        if line.startswith("- "):
            out.append("<ul>")
            while i < len(lines) and lines[i].startswith("- "):
                out.append(f"<li>{_inline(lines[i][2:])}</li>")
                i += 1
            out.append("</ul>")
            continue
        if line.startswith("#"):
            level = min(len(line) - len(line.lstrip("#")), 6)
            out.append(f"<h{level}>{_inline(line[level:].strip())}</h{level}>")
        elif line.startswith("> "):
            out.append(f"<blockquote>{_inline(line[2:])}</blockquote>")
        elif line.startswith("<details><summary>"):
            out.append("<details><summary>" + _inline(line[len("<details><summary>"):-len("</summary>")])
                       + "</summary>")
        elif line == "</details>":
            out.append("</details>")
        elif line.strip():
            out.append(f"<p>{_inline(line)}</p>")
        i += 1
    return "\n".join(out)
