"""The run summary and `adaln-bench report` fit ordinary terminals: at 80 and 120 columns every verdict
(yes / NO / a status) and every forward + backward time is on its row in full, and the failing counts below."""
import io
import json

import pytest
from rich.console import Console

from conftest import ROOT

from adaln_bench.datamodel.io import read_report
from adaln_bench.reports.render import print_summary

REPORTS = [
    next((ROOT / "results").rglob("adaln_projection.h200.853103e.json")),
    next((ROOT / "results").rglob("adaln_projection.h200.bd79cc3.json")),
    ROOT / "results" / "b200" / "adaln_projection" / "adaln_projection.b200.prior-art.json",
]
SHOWN = ("3", "256", "2048")


def _time(us):
    if us is None:
        return "—"
    return f"{us / 1000:.2f} ms" if us >= 1000 else f"{us:.0f} µs"


def _expected_rows(data):
    """(mode, [(short name, verdict, times)]) straight from the JSON, independent of the renderer."""
    for mode, candidates in data["results"].items():
        rows = []
        for name, entry in candidates.items():
            short = name[: -len(f"[{mode}]")] if name.endswith(f"[{mode}]") else name
            if "unavailable" in entry:
                rows.append((short, entry.get("status") or "unavailable", ["—"] * 3))
            else:
                verdict = "yes" if entry["batch_invariance"]["batch_invariant"] else "NO"
                rows.append((short, verdict, [_time(entry["accuracy_latency"][t]["fwd_bwd_us"]) for t in SHOWN]))
        yield mode, rows


def _render(path, width):
    console = Console(file=io.StringIO(), width=width, color_system=None)
    print_summary(read_report(path), console)
    return console.file.getvalue()


@pytest.mark.parametrize("width", [80, 120])
@pytest.mark.parametrize("path", REPORTS, ids=lambda p: p.parent.name)
def test_every_verdict_and_time_is_on_its_row_in_full(path, width):
    text = _render(path, width)
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= width
    data = json.loads(path.read_text())
    at = 0
    checked = 0
    for mode, rows in _expected_rows(data):
        at = next(i for i in range(at, len(lines)) if lines[i].strip() == mode) + 1
        for short, verdict, times in rows:
            tokens = lines[at].split()
            assert tokens[:2] == [short, verdict], lines[at]
            assert " ".join(tokens[2:]) == " ".join(times), lines[at]
            at += 1
            checked += 1
    assert checked == sum(len(c) for c in data["results"].values())


@pytest.mark.parametrize("width", [80, 120])
def test_the_failing_counts_and_reasons_are_under_the_table(width):
    text = " ".join(_render(REPORTS[0], width).split())  # wrapping aside
    assert ("plain · diffusers: NO: all_rows[257] fwd 0/771, rowgrad 771/771; all_rows[2048] fwd 0/6144, "
            "rowgrad 6144/6144; sub_batches fwd 0/2060, rowgrad 2056/2060; sweep 960/2256") in text
    assert "vllm (every candidate): unavailable: ModuleNotFoundError: vllm is not installed" in text
    # The errors against FP64 are kept too, per T: forward / worst gradient.
    assert "3.7e-03/3.9e-03" in text


def test_a_crashed_mode_shows_its_one_line_cause(tmp_path):
    data = json.loads(REPORTS[0].read_text())
    data["results"]["plain"]["diffusers[plain]"] = {
        "unavailable": "mode plain crashed: exited with code 1: RuntimeError: DefaultCPUAllocator: can't allocate "
                       "memory: you tried to allocate 68718428160 bytes", "status": "crashed"}
    path = tmp_path / "r.json"
    path.write_text(json.dumps(data))
    text = _render(path, 80)
    row = next(line for line in text.splitlines() if line.split()[:2] == ["diffusers", "crashed"])
    assert row.split()[2:] == ["—", "—", "—"]
    assert "plain · diffusers: crashed: exited with code 1: RuntimeError: DefaultCPUAllocator: can't allocate " \
           "memory" in " ".join(text.split())


def test_device_time_is_shown_with_its_ratio_to_the_cuBLAS_path_where_the_report_has_one():
    from adaln_bench.reports.render import device_cells, markdown

    with_ref = read_report(next((ROOT / "results").rglob("adaln_projection.h200.bd79cc3.json")))
    data = json.loads((next((ROOT / "results").rglob("adaln_projection.h200.bd79cc3.json"))).read_text())
    for name in ("bundled", "diffusers[plain]"):
        cells = device_cells(with_ref.results["plain"][name])
        for t, cell in zip(SHOWN, cells):
            dt = data["results"]["plain"][name]["accuracy_latency"][t]["device_time"]
            assert cell == f"{_time(dt['fwd_bwd_us'])} ×{dt['reference']['fwd_bwd_ratio']:.2f}"
    assert device_cells(with_ref.results["plain"]["bundled"])[0] == "382 µs ×0.90"
    text = _render(next((ROOT / "results").rglob("adaln_projection.h200.bd79cc3.json")), 80)
    assert "device time (× cuBLAS, timed beside it)" in text and "382 µs ×0.90" in text
    assert "| plain | `bundled` | 382 µs ×0.90 |" in markdown(with_ref)
    # A report from before the reference: times alone; one without device time (RL-Kernel's): no such table.
    old = read_report(next((ROOT / "results").rglob("adaln_projection.h200.865e5e1.json")))
    assert all("×" not in c for c in device_cells(old.results["plain"]["bundled"]))
    prior = ROOT / "results" / "b200" / "adaln_projection" / "adaln_projection.b200.prior-art.json"
    assert "device time" not in _render(prior, 120) and "device time" not in markdown(read_report(prior))
