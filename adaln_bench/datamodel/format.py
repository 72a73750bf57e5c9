"""How every number in a rendered report or diff is written: durations, errors, plain values, Markdown tables.

Each renderer picks a precision for its purpose (a diff row, a summary cell, a plot axis), but all of them
write through the functions here, so a duration or an error reads the same way wherever it appears.
"""
from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Iterable, Optional, Union

MISSING = "—"  # a value a report does not have

Value = Union[bool, int, float, str, None]


@dataclass(frozen=True)
class DurationStyle:
    """Format specs for a duration in µs below 1 ms, in ms above, and in s above 1 s (None: stay in ms)."""

    us: str
    ms: str
    s: Optional[str] = None


DETAIL = DurationStyle(us=".1f", ms=".4g")  # a diff row: enough digits to see a 5 % change
BRIEF = DurationStyle(us=".0f", ms=".2f")  # a summary cell
AXIS = DurationStyle(us="g", ms="g", s="g")  # a plot's tick labels


def duration(us: Optional[float], style: DurationStyle = DETAIL) -> str:
    """A duration given in microseconds, in the unit that keeps it short."""
    if us is None:
        return MISSING
    if style.s is not None and us >= 1e6:
        return f"{us / 1e6:{style.s}} s"
    if us >= 1000:
        return f"{us / 1000:{style.ms}} ms"
    return f"{us:{style.us}} µs"


def error(value: Optional[float], digits: int = 3, short_zero: bool = True) -> str:
    """A relative error in scientific notation; an exact zero as 0 where `short_zero`."""
    if value is None:
        return MISSING
    if value == 0 and short_zero:
        return "0"
    return f"{value:.{digits}e}"


def axis_error(value: float) -> str:
    """A relative error on a plot axis: 1.0e-3 rather than 1.0e-03, to keep the labels short."""
    return error(value, 1, short_zero=False).replace("e-0", "e-")


def plain(value: Value) -> str:
    """A count, flag or word as a report shows it: booleans in lower case, a missing value as a dash."""
    if value is None:
        return MISSING
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


def change(relative: Optional[float]) -> str:
    return "" if relative is None else f"{relative:+.1%}"


def markdown_cell(text: object) -> str:
    """Text for one line of Markdown (a table cell, a list item): HTML in it escaped as on the site's pages
    (a report's strings are not the writer's markup), `|` escaped, newlines as spaces."""
    return html.escape(str(text), quote=False).replace("|", "\\|").replace("\n", " ")


def markdown_table(header: Iterable[str], rows: Iterable[Iterable[object]]) -> list[str]:
    """A GitHub Markdown table, one line per row, with `|` in the cells escaped."""
    header = list(header)
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(markdown_cell(cell) for cell in row) + " |" for row in rows]
    return lines
