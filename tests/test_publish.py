"""`adaln-bench publish`: collecting reports, series that never mix GPUs, shapes, quick and draws, steps
beyond the noise (and no step for a clock drift the paired ratio absorbs), and the command's bad input."""
from __future__ import annotations

import json
import random
import re
import shutil
from pathlib import Path

import pytest

from conftest import run_cli_forked
from publish_fixtures import DRIFT_AT, STEP_AT, base, history, make

from adaln_bench.errors import UserError
from adaln_bench.reports.site import steps
from adaln_bench.reports.site.build import MARKER, build_site
from adaln_bench.reports.site.collect import collect
from adaln_bench.reports.site.history import analyse
from adaln_bench.reports.site.series import group_series

pytest.importorskip("matplotlib")


def _site_json(site: Path) -> dict:
    return json.loads((site / "site.json").read_text(encoding="utf-8"))


def _series(site: Path, mode: str, candidate: str) -> dict:
    (group,) = _site_json(site)["groups"]
    return next(s for s in group["series"] if (s["mode"], s["candidate"]) == (mode, candidate))


@pytest.fixture(scope="module")
def fixture_site(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("history")
    history(folder)
    build_site([folder], folder / "site")
    return folder / "site"


# --- step detection, pure --------------------------------------------------------------------------


def test_a_flat_noisy_series_has_no_step_and_a_planted_one_is_found():
    rng = random.Random(1)
    flat = [1.0 * (1 + rng.gauss(0, 0.01)) for _ in range(20)]
    assert steps.detect_steps(flat, [0.002] * 20, 0.05, lambda a, b: True) == []
    stepped = flat[:12] + [v * 1.2 for v in flat[12:]]
    (found,) = steps.detect_steps(stepped, [0.002] * 20, 0.05, lambda a, b: True)
    assert found.index == 12 and found.direction == "up" and 0.17 < found.change < 0.23


def test_a_step_the_samples_do_not_confirm_or_below_the_threshold_is_not_marked():
    values = [1.0] * 5 + [1.3] * 5
    assert steps.detect_steps(values, [0.001] * 10, 0.05, lambda a, b: False) == []
    small = [1.0] * 5 + [1.03] * 5  # beyond its noise but within the 5 % a diff also ignores
    assert steps.detect_steps(small, [0.001] * 10, 0.05, lambda a, b: True) == []


def test_run_to_run_noise_is_no_step_and_a_10_percent_step_is_found():
    """2 % noise between runs (far above each run's own sample noise): the series' noise decides."""
    false, found = 0, 0
    for seed in range(60):
        rng = random.Random(seed)
        values = [1 + rng.gauss(0, 0.02) for _ in range(30)]
        false += bool(steps.detect_steps(values, [0.001] * 30, 0.05, lambda a, b: True))
        stepped = values[:15] + [v * 1.10 for v in values[15:]]
        found += any(abs(s.index - 15) <= 1 for s in steps.detect_steps(stepped, [0.001] * 30, 0.05,
                                                                         lambda a, b: True))
    assert false == 0 and found >= 57


def test_fit_segments_splits_where_the_level_moves():
    assert steps.fit_segments([0.0] * 4 + [1.0] * 4, [0.01] * 8) == [0, 4]
    assert steps.fit_segments([0.0, 0.001, -0.001, 0.0], [0.01] * 4) == [0]
    assert steps.series_noise([0.0, 0.01, 0.0]) == 0.0  # too few points to tell noise from a step
    assert steps.sample_noise([1.0]) == 0.0 and steps.sample_noise([1.0, 1.1, 0.9, 1.0]) > 0


# --- the fixture history: steps, drift, verdicts ---------------------------------------------------


def test_planted_step_is_marked_at_every_T_and_the_clock_drift_is_not(fixture_site):
    bundled = _series(fixture_site, "plain", "bundled")
    marked = {(m["index"], m["direction"]) for m in bundled["latency_steps"]}
    assert marked == {(STEP_AT, "up")}
    assert len(bundled["latency_steps"]) == 6  # T = 1, 3, 4, 64, 256, 2048
    assert bundled["summary"]["trend"] == "up"
    assert _series(fixture_site, "plain", "diffusers[plain]")["latency_steps"] == []
    assert _series(fixture_site, "plain", "diffusers[plain]")["summary"]["trend"] == "flat"


def test_the_drift_is_real_in_absolute_time_and_a_step_without_a_reference(tmp_path):
    """Without a reference beside it the same 10 % drift is a step: the paired ratio is what absorbs it."""
    paths = history(tmp_path)
    loaded = collect(paths).reports
    (series,) = [s for s in group_series(loaded)[next(iter(group_series(loaded)))]
                 if s.candidate == "diffusers[plain]"]
    before, after = series.points[DRIFT_AT - 1].latency["2048"], series.points[DRIFT_AT].latency["2048"]
    assert after.absolute_us / before.absolute_us == pytest.approx(1.10, rel=0.01)
    assert after.value == pytest.approx(before.value, rel=0.01)
    for path in paths:  # the same reports without their reference
        data = json.loads(path.read_text())
        for result in data["results"]["plain"].values():
            for point in result["accuracy_latency"].values():
                if point.get("device_time"):
                    point["device_time"].pop("reference", None)
        path.write_text(json.dumps(data))
    groups = group_series(collect(paths).reports)
    (series,) = [s for s in next(iter(groups.values())) if s.candidate == "diffusers[plain]"]
    found = {m.index for m in analyse(series).latency_steps()}
    assert found == {DRIFT_AT}


def test_verdicts_and_gradient_errors_read_generically(tmp_path):
    data = make(base(), "d" * 40, day=1, clock=1.0, bundled_ratio=0.94, seed=0)
    point = data["results"]["plain"]["bundled"]["accuracy_latency"]["3"]
    point["grad_rel_err"] = {"temb": None, "w": None, "b": None, "gate": 0.5}  # a gradient of another operator
    path = tmp_path / "r.json"
    path.write_text(json.dumps(data))
    (group,) = group_series(collect([path]).reports).values()
    by = {(s.mode, s.candidate): s for s in group}
    assert by[("plain", "bundled")].points[0].verdict == "yes"
    assert by[("plain", "diffusers[plain]")].points[0].verdict == "NO"
    assert by[("vllm", "diffusers[vllm]")].points[0].verdict == "unavailable"
    bundled = by[("plain", "bundled")].points[0]
    assert bundled.grad_err["3"] == 0.5 and bundled.grad_worst_of["3"] == "gate"


def test_series_never_mix_gpus_shapes_quick_or_draws(tmp_path):
    data = base()
    variants = {
        "native": {},
        "b200": {"environment.gpu": "NVIDIA B200"},
        "quick": {"quick": True},
        "shape": {"shape.dim": 3072},
        "draw": {"draw_geometry": {"name": "b200", "sms": 148}},
    }
    for name, edits in variants.items():
        report = make(data, name.ljust(40, "0"), day=1, clock=1.0, bundled_ratio=0.94, seed=0)
        for key, value in edits.items():
            *parents, leaf = key.split(".")
            target = report
            for p in parents:
                target = target[p]
            target[leaf] = value
        (tmp_path / f"{name}.json").write_text(json.dumps(report))
    groups = group_series(collect([tmp_path]).reports)
    assert len(groups) == 5
    assert all(len(s.points) == 1 for series in groups.values() for s in series)
    draws = {g.draw for g in groups}
    assert draws == {"native", "b200 (148 SMs)"}
    assert {g.gpu for g in groups} == {"NVIDIA H200", "NVIDIA B200"}


def test_collect_skips_non_reports_run_indexes_duplicates_and_hidden_folders(tmp_path):
    (tmp_path / "gpu" / "op" / "archive").mkdir(parents=True)
    history(tmp_path / "gpu" / "op" / "archive", n=2)
    shutil.copy(tmp_path / "gpu" / "op" / "archive" / "adaln_projection.h200.c0.json", tmp_path / "gpu" / "copy.json")
    (tmp_path / "gpu" / "kb.json").write_text('{"kind": "kernel_bench"}')
    (tmp_path / "gpu" / "broken.json").write_text("{not json")
    (tmp_path / "gpu" / "run.json").write_text('{"kind": "adaln_bench_run_index", "reports": []}')
    (tmp_path / ".git").mkdir()
    shutil.copy(tmp_path / "gpu" / "kb.json", tmp_path / ".git" / "x.json")
    c = collect([tmp_path])
    assert len(c.reports) == 2 and c.duplicates == 1 and c.run_indexes == 1 and len(c.not_reports) == 2


# --- the site -------------------------------------------------------------------------------------


def test_site_is_offline_and_every_link_resolves(fixture_site):
    pages = [fixture_site / "index.html", *sorted((fixture_site / "op").glob("*.html")),
             *sorted((fixture_site / "diffs").glob("*.html"))]
    assert len(pages) >= 3
    for page in pages:
        text = page.read_text(encoding="utf-8")
        assert "<script" not in text
        assert not re.search(r'(?:src|href)="(?:https?:)?//', text), page
        for target in re.findall(r'href="([^"#]+)', text):
            assert (page.parent / target).resolve().is_file(), (page, target)
    assert (fixture_site / MARKER).is_file()
    assert len(list((fixture_site / "reports").glob("*.json"))) == 6
    assert len(list((fixture_site / "diffs").glob("*.md"))) == 5
    md = next((fixture_site / "diffs").glob("*.md")).read_text(encoding="utf-8")
    assert md.startswith("## adaln-bench diff")


def test_op_page_has_a_plot_per_series_with_history(fixture_site):
    text = (fixture_site / "op" / "adaln_projection.html").read_text(encoding="utf-8")
    assert text.count("<svg") == 2  # diffusers[plain] and bundled; vLLM's has no number to plot
    assert 'xlink:href="../diffs/' in text and 'xlink:href="../reports/' in text  # markers link out
    ids = re.findall(r'\bid="([^"]+)"', text)
    assert len(ids) == len(set(ids))  # inlined SVGs do not share ids


def test_publish_command_writes_and_rewrites_a_site(tmp_path):
    history(tmp_path / "results", n=3)
    (tmp_path / "results" / "notes.json").write_text("[]")
    out = tmp_path / "site"
    proc = run_cli_forked("publish", str(tmp_path / "results"), "--out", str(out), timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "3 reports" in proc.stdout and "1 non-report" in proc.stdout
    (out / "stale.txt").write_text("from the earlier site")
    build_site([tmp_path / "results"], out)  # an earlier site is replaced whole
    assert not (out / "stale.txt").exists() and (out / "index.html").is_file()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temporary left


@pytest.mark.parametrize("case", ["no reports", "missing input", "not a site", "unwritable"])
def test_publish_bad_input_is_one_line_and_exit_2(tmp_path, case):
    results = tmp_path / "results"
    results.mkdir()
    out = tmp_path / "site"
    if case == "no reports":
        (results / "kb.json").write_text('{"kind": "kernel_bench"}')
    else:
        history(results, n=1)
    if case == "missing input":
        results = tmp_path / "nowhere"
    if case == "not a site":
        out.mkdir()
        (out / "keep.txt").write_text("mine")
    if case == "unwritable":
        out = Path("/proc/adaln-site")
    proc = run_cli_forked("publish", str(results), "--out", str(out), timeout=120)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and proc.stderr.startswith("adaln-bench: ")
    if case == "not a site":
        assert (out / "keep.txt").read_text() == "mine"


def test_build_site_refuses_no_reports_before_writing(tmp_path):
    with pytest.raises(UserError, match="no reports found"):
        build_site([tmp_path], tmp_path / "site")
    assert not (tmp_path / "site").exists()


def test_each_operator_gets_its_own_section_and_page(tmp_path):
    """The coming layout: one report per operator under results/<gpu>/<op>/, history under archive/."""
    data = base()
    for op, day in (("adaln_projection", 1), ("gate_residual", 2)):
        folder = tmp_path / "results" / "h200" / op / "archive"
        folder.mkdir(parents=True)
        report = make(data, op[:4].ljust(40, "0"), day=day, clock=1.0, bundled_ratio=0.94, seed=day)
        report["op"] = op
        (folder / f"{op}.h200.x.json").write_text(json.dumps(report))
    (tmp_path / "results" / "h200" / "run.json").write_text('{"kind": "adaln_bench_run_index"}')
    built = build_site([tmp_path / "results"], tmp_path / "site")
    assert built.reports == 2 and built.run_indexes == 1
    assert sorted(p.name for p in (tmp_path / "site" / "op").iterdir()) == ["adaln_projection.html",
                                                                          "gate_residual.html"]
    index = (tmp_path / "site" / "index.html").read_text(encoding="utf-8")
    assert 'id="op-adaln_projection"' in index and 'id="op-gate_residual"' in index


def test_a_failed_build_leaves_nothing_and_keeps_the_earlier_site(tmp_path, monkeypatch):
    from adaln_bench.reports.site import build

    history(tmp_path / "results", n=2)
    out = tmp_path / "results" / "site"  # inside an input folder: the next build must not read it back
    build_site([tmp_path / "results"], out)
    again = build_site([tmp_path / "results"], out)
    assert again.reports == 2 and again.duplicates == 0 and again.not_reports == 0

    def broken(*args, **kwargs):
        raise RuntimeError("the disk filled up")

    monkeypatch.setattr(build.pages, "op_page", broken)
    with pytest.raises(RuntimeError):
        build_site([tmp_path / "results"], out)
    assert (out / "index.html").is_file() and (out / MARKER).is_file()  # the earlier site, whole
    assert [p.name for p in out.parent.iterdir() if p.name.startswith(".")] == []
