"""`adaln-bench run`'s exit code says what happened: measured (0), some pair failed (3), nothing measured (4).

The runs' parents are forked from a process that has imported torch (conftest.run_cli_forked); their mode
children are the harness's own, new interpreters."""
import json
from pathlib import Path

import pytest

from conftest import run_cli_forked, run_main

TESTS = Path(__file__).resolve().parent
# The cold-start check has its own tests (test_cold_start.py); skipping it here saves a process per pair.
TINY = ("--device", "cpu", "--preset", "tiny", "--quick", "--quiet", "--no-cold-start")
ENV = {"PYTHONPATH": str(TESTS)}


@pytest.mark.slow
def test_measured_with_unavailable_pairs_is_0_and_strict_makes_it_3(tmp_path):
    # rl_kernel is not installed here: unavailable, which is fine unless --strict.
    out = tmp_path / "r.json"
    proc = run_cli_forked("run", *TINY, "--mode", "plain", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert json.loads(out.read_text())["results"]["plain"]["rl_kernel"]["status"] == "unavailable"
    strict = run_cli_forked("run", *TINY, "--mode", "plain", "--candidate", "rl_kernel", "--candidate", "diffusers",
                     "--strict", "--out", str(out))
    assert strict.returncode == 3, strict.stderr
    assert "--strict: 1 of 2 pair(s) unavailable here: plain/rl_kernel" in strict.stderr


def test_nothing_measured_because_unavailable_is_4(tmp_path):
    # vLLM does not import here: every pair of the only mode is unavailable.
    out = tmp_path / "r.json"
    proc = run_cli_forked("run", *TINY, "--mode", "vllm", "--out", str(out))
    assert proc.returncode == 4, proc.stderr
    assert "nothing was measured" in proc.stderr and "Traceback" not in proc.stderr
    report = json.loads((tmp_path / "r.incomplete.json").read_text())  # a failed run's report is incomplete
    assert report["modes"]["vllm"]["status"] == "unavailable"


def test_nothing_measured_because_every_pair_failed_is_4(tmp_path):
    out = tmp_path / "r.json"
    proc = run_cli_forked("run", *TINY, "--mode", "plain", "--candidate", "fixture_candidates:raises", "--out", str(out),
                   env=ENV)
    assert proc.returncode == 4, proc.stderr
    assert "nothing was measured: 1 of 1 pair(s) crashed, failed or timed out" in proc.stderr
    report = json.loads((tmp_path / "r.incomplete.json").read_text())
    assert report["results"]["plain"]["fixture_candidates:raises"]["status"] == "failed"


def test_an_exception_in_a_worker_thread_is_that_pairs_failure(tmp_path, capsys, monkeypatch):
    """A fault in the parent while running one mode (here: starting its child) fails that mode with the message;
    the other mode is measured, the report is complete and the exit code says a pair failed."""
    from adaln_bench.harness.processes import runner

    real = runner.Child

    class FailsForRecipe(real):
        def __init__(self, argv, log, **kwargs):
            if "CUBLASLT_WORKSPACE_SIZE" in kwargs["env"]:
                raise OSError("deliberate: cannot start this child")
            super().__init__(argv, log, **kwargs)

    monkeypatch.setattr(runner, "Child", FailsForRecipe)
    out = tmp_path / "r.json"
    code, _, err = run_main(["run", *TINY, "--mode", "plain", "--mode", "cublaslt_ws1", "--candidate", "diffusers",
                             "--out", str(out)], capsys)
    assert code == 3, err
    assert "Traceback" not in err
    report = json.loads(out.read_text())
    assert report["incomplete"] is False
    assert report["modes"]["plain"]["status"] == "ok"
    failed = report["modes"]["cublaslt_ws1"]
    assert failed["status"] == "failed" and failed["reason"] == "OSError: deliberate: cannot start this child"
    entry = report["results"]["cublaslt_ws1"]["diffusers[cublaslt_ws1]"]
    assert entry["status"] == "failed" and "deliberate: cannot start this child" in entry["unavailable"]


@pytest.mark.parametrize("env_line, message", [
    ('env = { "A=B" = "1" }', "environment variable name 'A=B' is not valid"),
    ("env = { FOO = true }", "env must be a table of strings, not FOO = True"),
    ("env = { FOO = 3 }", "env must be a table of strings, not FOO = 3"),
])
def test_bad_environment_entries_are_refused_before_anything_runs(tmp_path, env_line, message):
    recipe = tmp_path / "r.toml"
    recipe.write_text(f"[recipes.bad]\n{env_line}\n")
    out = tmp_path / "r.json"
    proc = run_cli_forked("run", *TINY, "--modes-file", str(recipe), "--mode", "bad", "--out", str(out))
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert not out.exists()


def test_exit_code_precedence():
    """Interrupt before nothing-measured before a failed pair before --strict's unavailable pairs."""
    from adaln_bench.harness.assembly.exit_status import run_exit
    from adaln_bench.datamodel.io import read_report

    report = read_report(next((TESTS.parent / "results").rglob("adaln_projection.h200.853103e.json")))
    assert run_exit(report, strict=False) == (0, None)
    assert run_exit(report, strict=False, signal_code=143) == (143, None)
    entries = report.results["plain"]
    from adaln_bench.datamodel.schema import CandidateUnavailable

    first = next(iter(entries))
    entries[first] = CandidateUnavailable(unavailable="x", status="timeout")
    assert run_exit(report, strict=True)[0] == 3
    for mode in report.results.values():
        for name in mode:
            mode[name] = CandidateUnavailable(unavailable="x", status="crashed")
    assert run_exit(report, strict=False)[0] == 4
    assert run_exit(report, strict=False, signal_code=130)[0] == 130
