"""`ops`, `candidates` and `modes` read at 80 columns: a compact default, details behind --details, no
name split across lines, and piped output as wide as COLUMNS says (80 where it says nothing)."""
from __future__ import annotations

import json
import re

import pytest

from conftest import run_cli_forked


@pytest.fixture(scope="module")
def listings():
    """Each listing's rows (--json) and its text at COLUMNS=80, compact and detailed."""
    out = {}
    for command in (["ops"], ["candidates"], ["modes", "--no-check"]):
        name = command[0]
        rows = run_cli_forked(*command, "--json")
        assert rows.returncode == 0, rows.stderr
        texts = {}
        for flag in ((), ("--details",)):
            proc = run_cli_forked(*command, *flag, env={"COLUMNS": "80"})
            assert proc.returncode == 0, proc.stderr
            texts[bool(flag)] = proc.stdout
        out[name] = (json.loads(rows.stdout), texts)
    return out


# Before: 175, 113 and 68 lines on an 80-column terminal. The compact tables have one line per row, a few
# more where a list of candidates wraps, and a title, a head and notes.
MOST_LINES = {"ops": 30, "candidates": 40, "modes": 24}


@pytest.mark.parametrize("name", ["ops", "candidates", "modes"])
def test_compact_listing_fits_80_columns_in_few_lines(listings, name):
    rows, texts = listings[name]
    lines = texts[False].splitlines()
    assert max(len(line.rstrip()) for line in lines) <= 80
    assert len(lines) <= MOST_LINES[name], texts[False]
    assert len(lines) >= len(rows)  # nothing dropped: a line per row at least


@pytest.mark.parametrize("name", ["ops", "candidates", "modes"])
@pytest.mark.parametrize("details", [False, True])
def test_no_name_is_split_across_lines(listings, name, details):
    """Every operator, candidate and mode name appears whole on one line."""
    rows, texts = listings[name]
    text = texts[details]
    assert max(len(line.rstrip()) for line in text.splitlines()) <= 80
    names = set()
    for r in rows:
        names.update(r.get(k) for k in ("op", "candidate", "mode") if r.get(k))
        names.update(r.get("candidates", []))
    assert names
    for n in names:
        assert re.search(rf"(?<![\w]){re.escape(n)}(?![\w])", text), f"{n} not whole in {name}:\n{text}"


def test_details_say_what_the_compact_table_leaves_out(listings):
    ops_rows, ops_texts = listings["ops"]
    assert ops_rows[0]["tensors"][0] in ops_texts[True] and ops_rows[0]["tensors"][0] not in ops_texts[False]
    cand_rows, cand_texts = listings["candidates"]
    described = next(r for r in cand_rows if r["available"])
    first_words = " ".join(described["description"].split()[:3])
    assert first_words in " ".join(cand_texts[True].split())
    # An unavailable candidate's reason is a numbered note in the compact table, said once.
    missing = [r for r in cand_rows if not r["available"]]
    if missing:
        reason = missing[0]["reason"]
        flat = " ".join(cand_texts[False].split())
        assert flat.count(reason) == 1 and re.search(r"no \[\d+\]", cand_texts[False])


def test_piped_output_follows_columns():
    proc = run_cli_forked("ops", env={"COLUMNS": "120"})
    assert proc.returncode == 0, proc.stderr
    widths = [len(line.rstrip()) for line in proc.stdout.splitlines()]
    assert 80 < max(widths) <= 120  # the candidates fit on one line each where there is room


def test_piped_console_is_80_wide_without_columns(monkeypatch):
    from adaln_bench.reports.terminal import stdout_console as listing_console

    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.setattr("sys.stdout.isatty", lambda: False, raising=False)
    assert listing_console().width == 80
    monkeypatch.setenv("COLUMNS", "132")
    assert listing_console().width == 132
    monkeypatch.setenv("COLUMNS", "wide")  # not a number: as if unset
    assert listing_console().width == 80


def test_report_piped_fits_80_columns():
    """`report` follows the listings' rule (reports/terminal.py; `envs list` prints through the same console):
    piped without COLUMNS, no line is over 80 columns."""
    from pathlib import Path

    committed = Path(__file__).resolve().parents[1] / "results" / "h200" / "adaln_projection"
    report = sorted(committed.glob("adaln_projection.h200.*.h3.plain.json"))[0]
    proc = run_cli_forked("report", str(report), env={"COLUMNS": ""})
    assert proc.returncode == 0, proc.stderr
    widths = [len(line.rstrip()) for line in proc.stdout.splitlines()]
    assert widths and max(widths) <= 80
