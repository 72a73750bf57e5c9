"""Nothing complete is ever replaced by something less complete: an interrupted or failed run writes its reports
and its run index as `<name>.incomplete.json`, beside the complete `<name>.json`, and a later complete run
replaces both."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import ROOT, run_cli_forked

from adaln_bench.datamodel.io import read_report
from adaln_bench.reports.naming import RunName, incomplete_path, index_path, report_path
from adaln_bench.reports.run_output import write_run

TESTS = Path(__file__).resolve().parent
NAME = RunName("h200", "abc1234", "h3")
TINY = ("--device", "cpu", "--preset", "tiny", "--quick", "--quiet", "--no-cold-start")


def _committed(name: str) -> Path:
    return next((ROOT / "results").rglob(name))


def _report(incomplete: bool = False, measured: bool = True):
    report = read_report(_committed("adaln_projection.h200.fd00ad3.h3.plain.json")).model_copy(deep=True)
    report.incomplete = incomplete
    if not measured:
        from adaln_bench.datamodel.schema import CandidateUnavailable

        report.results = {mode: {name: CandidateUnavailable(unavailable="deliberate", status="crashed")
                                 for name in cands} for mode, cands in report.results.items()}
    return report


def test_an_incomplete_run_writes_beside_the_complete_one_and_a_complete_run_replaces_both(tmp_path, capsys):
    op = "adaln_projection"
    write_run({op: _report()}, tmp_path, NAME, single_file=False, slots=[None], quiet=True)
    complete, index = report_path(tmp_path, NAME, op), index_path(tmp_path, NAME)
    before = complete.read_bytes(), index.read_bytes()

    for cut in (_report(incomplete=True), _report(measured=False)):  # interrupted; every pair failed
        written = write_run({op: cut}, tmp_path, NAME, single_file=False, slots=[None], quiet=True)
        assert (complete.read_bytes(), index.read_bytes()) == before
        assert written.reports[op].path == incomplete_path(complete) and incomplete_path(complete).is_file()
        assert written.index == incomplete_path(index)
        assert json.loads(incomplete_path(index).read_text())["reports"][op].endswith(".incomplete.json")
        assert "kept (complete)" in capsys.readouterr().err

    write_run({op: _report()}, tmp_path, NAME, single_file=False, slots=[None], quiet=True)
    assert complete.is_file() and index.is_file()
    assert not incomplete_path(complete).exists() and not incomplete_path(index).exists()


def test_an_incomplete_report_named_by_out_goes_beside_it(tmp_path):
    out = tmp_path / "r.json"
    write_run({"adaln_projection": _report()}, out, NAME, single_file=True, slots=[None], quiet=True)
    before = out.read_bytes()
    write_run({"adaln_projection": _report(incomplete=True)}, out, NAME, single_file=True, slots=[None], quiet=True)
    assert out.read_bytes() == before
    assert json.loads((tmp_path / "r.incomplete.json").read_text())["incomplete"] is True


@pytest.mark.slow
@pytest.mark.parametrize("sig, code, cause", [(signal.SIGINT, 130, "SIGINT"), (signal.SIGTERM, 143, "SIGTERM")])
def test_an_interrupted_second_run_leaves_the_first_runs_complete_reports_in_place(tmp_path, sig, code, cause):
    out = tmp_path / "results"
    args = ("run", *TINY, "--mode", "plain", "--candidate", "fixture_candidates:hang", "--out", str(out))
    # The fixture hangs in the mode FIXTURE_MISBEHAVE_IN names: in the first run, one that is not run.
    first = run_cli_forked(*args, env={"PYTHONPATH": str(TESTS), "FIXTURE_MISBEHAVE_IN": "cublaslt_ws1"},
                           timeout=240)
    assert first.returncode == 0, first.stderr
    complete = {p: p.read_bytes() for p in out.rglob("*.json")}
    assert len(complete) == 2  # the report and the run index

    marker = tmp_path / "hanging"
    proc = subprocess.Popen([sys.executable, "-m", "adaln_bench", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(TESTS)]),
                                 "FIXTURE_MISBEHAVE_IN": "plain", "FIXTURE_MARKER": str(marker)})
    deadline = time.monotonic() + 240
    while not marker.exists():
        assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()
        time.sleep(0.1)
    proc.send_signal(sig)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == code, stderr
    assert {p: p.read_bytes() for p in complete} == complete  # every complete file, byte for byte
    cut = sorted(p for p in out.rglob("*.incomplete.json"))
    assert [p.parent.name for p in cut] == ["adaln_projection", "runs"], cut
    report = json.loads(cut[0].read_text())
    assert report["incomplete"] is True
    assert cause in report["modes"]["plain"]["reason"] and "by the user" not in report["modes"]["plain"]["reason"]
    assert cause in stderr and "incomplete" in stderr and "Traceback" not in stderr


def _complete_and_cut(folder: Path) -> tuple[Path, Path]:
    complete = report_path(folder, NAME, "adaln_projection")
    write_run({"adaln_projection": _report()}, folder, NAME, single_file=False, slots=[None], quiet=True)
    cut = _report(incomplete=True)
    cut.started_at = "2099-01-01T00:00:00+00:00"  # newer than the complete one: still not the answer
    write_run({"adaln_projection": cut}, folder, NAME, single_file=False, slots=[None], quiet=True)
    return complete, incomplete_path(complete)


def test_readers_of_folders_pass_over_incomplete_reports(tmp_path):
    from adaln_bench.errors import UserError
    from adaln_bench.reports.report_sets import load_path
    from adaln_bench.reports.site.collect import collect

    complete, cut = _complete_and_cut(tmp_path / "run")
    assert cut.is_file()
    assert [r.path for r in load_path(tmp_path / "run")] == [complete]  # fidelity's folders
    collected = collect([tmp_path / "run"])  # publish's
    assert [r.path for r in collected.reports] == [complete] and collected.incomplete == 2  # report and index
    complete.unlink()
    with pytest.raises(UserError, match="only incomplete reports"):
        load_path(tmp_path / "run")
    assert [r.path for r in load_path(cut)] == [cut]  # named: read as given


def test_a_mode_whose_child_did_not_end_in_time_is_said_started_then_stopped():
    from adaln_bench.harness.processes.protocol import OpWork
    from adaln_bench.harness.processes.protocol import RunConfig
    from adaln_bench.harness.processes.runner import ModeJob, ModeRunner
    from adaln_bench.harness.assembly.shapes import PRESETS
    from adaln_bench.modes.registry import all_modes

    options = RunConfig(device="cpu", shape=PRESETS["tiny"], quick=True, timeout_s=10)
    job = ModeJob(all_modes(None)["plain"], (OpWork(op="adaln_projection", candidates=("diffusers",)),))
    with ModeRunner(options, [None], lambda mode, event: None) as runner:
        runner.stop_cause = lambda: "stopped by SIGTERM"
        assert runner.unanswered(job).run.reason == "not started: stopped by SIGTERM"
        runner._started.add(job.key)  # as run_one records a child it started
        reason = runner.unanswered(job).run.reason
    assert reason.startswith("stopped by SIGTERM;") and "not started" not in reason
