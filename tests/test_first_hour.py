"""Issue 30's smaller things: what a newcomer met in the first hour, each case as they ran it."""
from __future__ import annotations

from conftest import run_main


def test_help_text_keeps_square_brackets(capsys):
    # typer's rich markup took `[plot]` for a style tag and printed `pip install 'adaln-bench'`.
    code, out, _ = run_main(["plot", "--help"], capsys)
    assert code == 0 and "adaln-bench[plot]" in out
    code, out, _ = run_main(["envs", "create", "--help"], capsys)
    assert code == 0 and "[pins]" in out


# --- the run summary and report --------------------------------------------------------------------

def _summary_text(path, width=100):
    import io

    from rich.console import Console

    from adaln_bench.datamodel.io import read_report
    from adaln_bench.reports.render import print_summary

    console = Console(file=io.StringIO(), width=width, color_system=None)
    print_summary(read_report(path), console)
    return " ".join(console.file.getvalue().split())


def _edited_reference(tmp_path, edit):
    import json

    from conftest import REFERENCE

    data = json.loads(REFERENCE.read_text())
    edit(data)
    path = tmp_path / "r.json"
    path.write_text(json.dumps(data))
    return path


def test_the_stderr_note_quotes_the_warning_not_the_code_line_under_it():
    from adaln_bench.reports.render import telling_line

    tail = ("/venv/lib/python3.11/site-packages/torch/autograd/graph.py:829: UserWarning: the grad of a non-leaf "
            "Tensor is being accessed\n  return Variable._execution_engine.run_backward(\n")
    assert telling_line(tail).startswith("/venv/lib/python3.11/site-packages/torch/autograd/graph.py:829: "
                                         "UserWarning: the grad")
    assert telling_line("just a line\nanother line\n") == "another line"
    assert telling_line("Traceback (most recent call last):\n  x\nValueError: bad\n  y = 1\n") == "ValueError: bad"


def test_a_true_flag_over_nonzero_counts_shows_the_counts_verdict(tmp_path):
    def edit(data):
        inv = data["results"]["plain"]["diffusers[plain]"]["batch_invariance"]
        inv["batch_invariant"] = True
        for record in inv["all_rows"].values():
            record["rowgrad_differ"] = 3

    from adaln_bench.datamodel.io import read_report
    from adaln_bench.reports.render import invariance_verdict

    path = _edited_reference(tmp_path, edit)
    entry = read_report(path).results["plain"]["diffusers[plain]"]
    verdict = invariance_verdict(entry)
    assert verdict.startswith("NO: all_rows[") and "rowgrad 3/" in verdict
    assert verdict.endswith("the report's batch_invariant says true, its counts disagree")
    text = _summary_text(path)
    assert "plain · diffusers: NO: all_rows[" in text


def test_the_replay_is_not_called_diffusers_in_the_table(tmp_path):
    def edit(data):
        data["results"]["plain"]["diffusers[plain]"]["source"] = (
            "replay of diffusers AdaLN projection, BF16 F.linear (diffusers unavailable) [plain]")

    text = _summary_text(_edited_reference(tmp_path, edit))
    assert "diffusers (replay)" in text


def test_a_typed_interpreter_that_is_not_there_is_bad_input(capsys):
    code, out, err = run_main(["run", "--device", "cpu", "--quick", "--preset", "tiny", "--mode", "vllm",
                               "--python", "vllm=/nonexistent"], capsys)
    assert code == 2 and err == "adaln-bench: --python vllm=/nonexistent: no such file\n"
    code, out, err = run_main(["modes", "--python", "vllm=/nonexistent"], capsys)
    assert code == 2 and err.count("\n") == 1


# --- the runner --------------------------------------------------------------------------------------

def test_work_directories_of_a_dead_parent_are_removed_at_the_next_start(tmp_path):
    import os
    import subprocess
    import sys

    from adaln_bench.harness.processes.runner import OWNER_FILE, remove_stale_workdirs

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True, check=True)
    stale, live, foreign, kept = (tmp_path / n for n in ("adaln-bench-a1", "adaln-bench-b2", "adaln-bench-c3",
                                                         "adaln-bench-kept"))
    for d in (stale, live, foreign, kept):
        d.mkdir()
    (stale / OWNER_FILE).write_text(dead.stdout)
    (stale / "plain.spec.json").write_text("{}")
    (live / OWNER_FILE).write_text(f"{os.getpid()}\n")
    (foreign / OWNER_FILE).write_text("not a pid\n")
    assert remove_stale_workdirs(tmp_path) == [stale]
    assert not stale.exists() and live.exists() and foreign.exists() and kept.exists()


def test_the_runner_records_its_pid_in_its_work_directory():
    import os

    from adaln_bench.harness.processes.protocol import RunConfig
    from adaln_bench.harness.processes.runner import OWNER_FILE, ModeRunner
    from adaln_bench.harness.assembly.shapes import PRESETS

    options = RunConfig(device="cpu", shape=PRESETS["tiny"], quick=True, timeout_s=10)
    with ModeRunner(options, [None], lambda mode, event: None) as runner:
        assert (runner.workdir / OWNER_FILE).read_text().strip() == str(os.getpid())
    assert not runner.workdir.exists()


def test_a_mode_the_child_reported_unavailable_stays_unavailable_after_a_timeout():
    from adaln_bench.harness.processes.protocol import ChildResult, OpWork
    from adaln_bench.harness.processes.protocol import RunConfig
    from adaln_bench.harness.processes.runner import ModeJob, ModeRunner
    from adaln_bench.harness.assembly.shapes import PRESETS
    from adaln_bench.modes.registry import all_modes
    from adaln_bench.datamodel.schema import CandidateUnavailable

    options = RunConfig(device="cpu", shape=PRESETS["tiny"], quick=True, timeout_s=1)
    work = (OpWork(op="adaln_projection", candidates=["diffusers", "bundled"]),)
    job = ModeJob(all_modes()["vllm"], work)
    said = ChildResult(mode="vllm", status="unavailable", reason="ModuleNotFoundError: no vllm")
    partial = ChildResult(mode="vllm", status="running", results={"adaln_projection": {
        "bundled": CandidateUnavailable(unavailable="needs CUDA", status="unavailable")}})
    with ModeRunner(options, [None], lambda mode, event: None) as runner:
        whole = runner._outcome(job, "timeout", "no result within --timeout 1 s", said, 1.0, -9, None)
        part = runner._outcome(job, "timeout", "no result within --timeout 1 s", partial, 1.0, -9, None)
    entries = whole.results["adaln_projection"]
    assert {e.status for e in entries.values()} == {"unavailable"}
    assert all("ModuleNotFoundError: no vllm" in e.unavailable for e in entries.values())
    entries = part.results["adaln_projection"]
    assert entries["bundled"].status == "unavailable"  # reported by the child: kept
    (other,) = [e for name, e in entries.items() if name != "bundled"]
    assert other.status == "timeout"  # never reached: the timeout is its honest cause


def test_modes_on_the_cpu_says_a_cuda_recipe_is_not_applicable_and_that_it_is_checking():
    import json

    from conftest import run_cli_forked

    proc = run_cli_forked("modes", "--json", "--device", "cpu")
    assert proc.returncode == 0, proc.stderr
    rows = {r["mode"]: r for r in json.loads(proc.stdout)}
    assert rows["cublaslt_ws1"]["available"] is False and rows["cublaslt_ws1"]["reason"] == "not applicable on cpu"
    assert rows["plain"]["available"] is True
    assert proc.stderr.startswith("adaln-bench: checking ") and "each in a child process" in proc.stderr


# --- progress in a log -------------------------------------------------------------------------------

def _log_progress(names, now):
    import io
    from types import SimpleNamespace

    from adaln_bench.commands.progress import RunProgress

    jobs = [SimpleNamespace(mode=SimpleNamespace(name=n), key=n) for n in names]
    stream = io.StringIO()
    return RunProgress(jobs, disabled=False, stream=stream, now=lambda: now[0]), stream


def test_modes_that_never_started_say_not_started():
    now = [0.0]
    progress, stream = _log_progress(["plain", "vllm", "sglang"], now)
    progress.update("plain", {"phase": "starting", "candidate": None, "done": 0, "total": None})
    now[0] += 5
    progress.finish("plain", "interrupted")
    progress.finish("vllm", "interrupted")
    progress.finish("sglang", "unavailable")  # refused before its child started (another interpreter's check)
    lines = [line.split("] ", 1)[1] for line in stream.getvalue().splitlines()]
    assert lines == ["plain: started", "plain: interrupted after 0:00:05", "vllm: not started", "sglang: unavailable"]


def test_a_mode_that_did_not_end_ok_says_why_on_its_last_line():
    # A log may be all that comes back from a GPU machine: the reason goes there, on one line, shortened.
    from adaln_bench.bounded_read import REASON_CHARS

    now = [0.0]
    progress, stream = _log_progress(["plain", "vllm.1", "sglang", "sglang.1"], now)
    for name in ("plain", "vllm.1"):
        progress.update(name, {"phase": "starting", "candidate": None, "done": 0, "total": None})
    now[0] += 11
    progress.finish("plain", "ok", "ignored when ok")
    progress.finish("vllm.1", "crashed", "torch.OutOfMemoryError: CUDA out of memory.\nTried to allocate 2 GiB")
    progress.finish("sglang", "unavailable", "x" * 1000)
    progress.finish("sglang.1", "ok", "not started: the mode's other parts claimed every operator")
    lines = [line.split("] ", 1)[1] for line in stream.getvalue().splitlines()]
    assert lines[-1] == "sglang.1: ok: not started: the mode's other parts claimed every operator"
    assert lines[2:-1] == ["plain: ok after 0:00:11",
                         "vllm.1: crashed after 0:00:11: torch.OutOfMemoryError: CUDA out of memory. Tried to "
                         "allocate 2 GiB",
                         "sglang: unavailable: " + "x" * (REASON_CHARS - 1) + "…"]


def test_a_log_gets_a_heartbeat_line_during_a_long_phase():
    from adaln_bench.commands.progress import HEARTBEAT_S

    now = [0.0]
    progress, stream = _log_progress(["plain"], now)
    progress.update("plain", {"phase": "starting", "candidate": None, "done": 0, "total": None})
    progress.update("plain", {"phase": "accuracy and latency, T=2048", "candidate": "diffusers[plain]",
                              "done": 0, "total": 0})
    now[0] += HEARTBEAT_S - 1
    progress.heartbeat()
    assert len(stream.getvalue().splitlines()) == 2  # not yet
    now[0] += 2
    progress.heartbeat()
    progress.heartbeat()  # just printed: quiet again for HEARTBEAT_S
    last = stream.getvalue().splitlines()
    assert len(last) == 3
    assert last[-1] == ("[0:00:31] plain · accuracy and latency, T=2048: still running (0:00:31, 0:00:31 in this "
                        "phase)")
    now[0] += HEARTBEAT_S
    progress.finish("plain", "ok")
    progress.heartbeat()  # a finished mode has no heartbeat
    assert stream.getvalue().splitlines()[-1].endswith("plain: ok after 0:01:01")


def test_the_heartbeat_thread_runs_only_in_a_log():
    now = [0.0]
    progress, _ = _log_progress(["plain"], now)
    with progress:
        assert progress._beat is not None and progress._beat.is_alive()
    assert progress._beat is None


# --- diff ----------------------------------------------------------------------------------------------

def _write(tmp_path, name, data):
    import json

    path = tmp_path / name
    path.write_text(json.dumps(data))
    return path


def test_diff_of_a_full_report_against_a_latency_only_one_is_not_comparable(tmp_path, capsys):
    import copy
    import json

    from conftest import REFERENCE

    full = json.loads(REFERENCE.read_text())
    latency = copy.deepcopy(full)
    latency.setdefault("tool", {"name": "adaln-bench", "version": "0.1.0", "commit": None, "dirty": None})
    latency["tool"]["argv"] = ["run", "--latency-only"]
    for cands in latency["results"].values():
        for entry in cands.values():
            entry.pop("batch_invariance", None)
            for point in entry.get("accuracy_latency", {}).values():
                point["fwd_rel_err"] = None
    old, new = _write(tmp_path, "full.json", full), _write(tmp_path, "lat.json", latency)
    code, out, _ = run_main(["diff", str(old), str(new)], capsys)
    text = " ".join(out.split())
    assert code == 3, text
    assert "one full and one latency-only report (NEW ran with --latency-only)" in text and "MISSING" in text
    # Without argv (an older report), the results themselves say latency-only.
    latency["tool"]["argv"] = []
    new = _write(tmp_path, "lat2.json", latency)
    code, out, _ = run_main(["diff", str(new), str(old)], capsys)
    assert code == 3 and "OLD ran with --latency-only" in " ".join(out.split())
    code, out, _ = run_main(["diff", str(new), str(new)], capsys)  # two latency-only reports compare
    assert code == 0, out


def test_diff_hides_informational_rows_unless_asked_and_says_how_many():
    import json

    from test_diff import REFERENCE_DATA, _with_device_time

    from adaln_bench.reports.diff import diff_reports
    from adaln_bench.reports.diff_render import render_markdown
    from adaln_bench.reports.diff import FailOn

    base = _with_device_time(REFERENCE_DATA)
    noisy_host = _with_device_time(REFERENCE_DATA, event_scale=1.5)
    result = diff_reports(base, noisy_host)
    assert result.hidden_informational > 0 and not result.listed
    sides = {"OLD": ("a.json", base), "NEW": ("b.json", noisy_host)}
    text = render_markdown(result, sides, FailOn.regression, 0, False)
    assert "(WORSE)" not in text
    assert f"{result.hidden_informational} informational rows not listed" in text and "--all lists them" in text
    assert "No counting row changed." in text
    every = render_markdown(result, sides, FailOn.regression, 0, True)
    assert "(WORSE)" in every and "not listed" not in every


def test_the_u_test_note_is_in_words():
    from adaln_bench.datamodel.stats import LatencyVerdict, StatVerdict

    past = LatencyVerdict(StatVerdict.WORSE, 1.152, 1e-41, 3e-40, 0.002, 0.05, 300, 300)
    assert past.describe() == "+15.2 %, past ±5% (U test: p = 3e-40 that it is not; 300 vs 300 samples)"
    within = LatencyVerdict(StatVerdict.SAME, 1.02, 0.01, 1.0, 0.002, 0.05, 300, 300)
    assert within.describe() == ("+2.0 %, not shown to be past ±5% (U test: p = 1 that it is not, needs ≤ 0.002; "
                                 "300 vs 300 samples)")


def test_a_cpu_run_estimated_over_a_minute_gets_an_estimate_line():
    from adaln_bench.harness.assembly.cpu_estimate import CPU_LIMIT_S, estimate_line

    what = "flux --quick on the CPU: about 4 min per measured (mode, candidate) pair (estimated here)"
    assert estimate_line(30, what) is None  # a short run says nothing
    assert estimate_line(CPU_LIMIT_S + 1, what) is None  # refused without --yes, with its own line
    assert estimate_line(240, what) == (f"adaln-bench: {what}; it runs now, with a progress line at least every "
                                        "30 s in a log")


# --- plot --------------------------------------------------------------------------------------------

def _latency_only(data):
    import copy

    data = copy.deepcopy(data)
    for cands in data["results"].values():
        for entry in cands.values():
            entry.pop("batch_invariance", None)
            for point in entry.get("accuracy_latency", {}).values():
                point["fwd_rel_err"], point["grad_rel_err"] = None, None
    return data


def test_the_plot_leaves_out_empty_panels_and_says_latency_is_host_inclusive():
    import json

    from conftest import REFERENCE

    from adaln_bench.reports.plot import drawn_panels, panel_title, panels
    from adaln_bench.datamodel.schema import Report

    data = json.loads(REFERENCE.read_text())
    full, latency = Report.model_validate(data), Report.model_validate(_latency_only(data))
    assert drawn_panels([full]) == panels([full])  # the panels of its operator's metrics and gradients
    assert [m.name for m in panels([full]) if m.name.startswith("grad_rel_err.")] == [
        "grad_rel_err.temb", "grad_rel_err.w"]  # the projection's first two gradients, d_temb and dW
    assert [m.name for m in drawn_panels([latency])] == ["fwd_us", "fwd_bwd_us"]
    assert len(drawn_panels([latency, full])) == len(panels([full]))  # an overlay draws what either has
    titles = {m.name: panel_title(m) for m in panels([full])}
    assert titles["fwd_bwd_us"] == "Forward + backward latency, host-inclusive event median (lower is better)"
    assert "host-inclusive" not in titles["fwd_rel_err"]


def test_identical_series_are_found_so_that_none_hides_another():
    from adaln_bench.reports.plot import Series, coinciding

    a = Series(("plain", "diffusers[plain]"), (1, 3), (1e-3, 2e-3))
    b = Series(("vllm", "diffusers[vllm]"), (1, 3), (1e-3, 2e-3))
    c = Series(("plain", "bundled"), (1, 3), (1e-3, 3e-3))
    assert coinciding([a, b, c]) == [[a, b]]
    assert coinciding([a, c]) == []


def test_a_latency_only_plot_has_two_panels_and_unit_ticks(tmp_path):
    import json

    import pytest

    pytest.importorskip("matplotlib")
    from conftest import REFERENCE

    from adaln_bench.reports.plot import plot_reports
    from adaln_bench.datamodel.schema import Report

    latency = Report.model_validate(_latency_only(json.loads(REFERENCE.read_text())))
    out = plot_reports([("lat.json", latency)], tmp_path / "p.png")
    data = out.read_bytes()
    assert data[:4] == b"\x89PNG"
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    assert height == 600 and width == 2100  # one row: two latency panels and the matrix
