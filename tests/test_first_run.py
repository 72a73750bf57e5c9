"""The first run a new user makes on a CPU: quick, honest about what does not apply, no hours-long surprise."""
import json
import re

import pytest

from conftest import run_cli, run_cli_forked

from adaln_bench.harness.measurement import plan as P
from adaln_bench.harness.assembly.cpu_estimate import plan_work
from adaln_bench.harness.measurement.probes import planned_runs


@pytest.mark.slow
def test_cuda_only_recipes_are_listed_not_applicable_on_the_cpu(tmp_path):
    out = tmp_path / "r.json"
    proc = run_cli("run", "--device", "cpu", "--preset", "tiny", "--quick", "--candidate", "diffusers",
                   "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "not applicable on cpu, skipped: cublaslt_ws1" in proc.stderr
    report = json.loads(out.read_text())
    skipped = report["modes"]["cublaslt_ws1"]
    assert (skipped["status"], skipped["reason"], skipped["wall_s"]) == ("unavailable", "not applicable on cpu", None)
    entry = report["results"]["cublaslt_ws1"]["diffusers[cublaslt_ws1]"]
    assert entry["status"] == "unavailable" and "not applicable on cpu" in entry["unavailable"]
    assert report["modes"]["plain"]["status"] == "ok"
    # A default run checks each measured pair's cold start (`--no-cold-start` leaves it out: test_runner.py).
    assert report["results"]["plain"]["diffusers[plain]"]["cold_start"]["status"] == "ok"
    assert report["environment"]["cpu_threads"] == 1  # the child's one torch thread


@pytest.mark.parametrize("preset", ["h3", "flux"])
def test_a_full_size_preset_on_the_cpu_is_refused_with_the_estimate(tmp_path, preset):
    proc = run_cli_forked("run", "--device", "cpu", "--preset", preset, "--mode", "plain", "--out", str(tmp_path / "r.json"))
    assert proc.returncode == 2, proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert f"{preset} (D=" in line and "on the CPU: about " in line and re.search(r"about [0-9.]+ (min|h) per measured", line)
    assert "pass --yes to run it anyway" in line
    assert not (tmp_path / "r.json").exists()


def test_the_estimate_counts_every_probe_run():
    # The probes' own count, plus for each accuracy size the accuracy pair and the timed calls.
    for plan in (P.FULL, P.QUICK):
        extra = len(plan.accuracy_sizes) * (2 + 2 * 120)
        assert plan_work(plan).runs == planned_runs(plan) + extra
