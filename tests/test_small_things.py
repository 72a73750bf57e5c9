"""Small things a user notices: file modes, the header on a CPU, a bare invocation, a child's warnings, .gitignore."""
import json
import os
import shutil
import stat
import subprocess

import pytest

from conftest import ROOT, run_cli

from adaln_bench.datamodel.io import read_report, write_report


@pytest.mark.parametrize("umask, expected", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_reports_are_written_readable_as_the_umask_allows(tmp_path, reference_path, umask, expected):
    report = read_report(reference_path)
    old = os.umask(umask)
    try:
        path = write_report(report, tmp_path / "r.json")
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == expected


def test_the_header_of_a_cpu_report_says_no_cuda(reference_path):
    from adaln_bench.reports.render import header

    report = read_report(reference_path)
    report.environment.cuda = None
    report.environment.gpu = None
    text = header(report)
    assert "no CUDA" in text and "None" not in text


def test_a_bare_invocation_prints_help_and_no_stray_line():
    proc = run_cli()
    assert proc.returncode == 2
    assert "Usage" in proc.stdout and "run" in proc.stdout
    assert proc.stderr == ""


@pytest.mark.slow
def test_a_recipes_stderr_is_kept_when_the_mode_succeeds(tmp_path):
    recipe = tmp_path / "r.toml"
    recipe.write_text('[recipes.preload]\nenv = { LD_PRELOAD = "/nonexistent/libnothing.so" }\n')
    out = tmp_path / "r.json"
    proc = run_cli("run", "--device", "cpu", "--preset", "tiny", "--quick", "--modes-file", str(recipe),
                   "--mode", "preload", "--candidate", "diffusers", "--no-cold-start", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    run = json.loads(out.read_text())["modes"]["preload"]
    assert run["status"] == "ok"
    # The dynamic loader's warning, which says the recipe did not do what it meant to.
    assert "libnothing.so" in run["stderr_tail"] and "LD_PRELOAD" in run["stderr_tail"]
    assert stat.S_IMODE(out.stat().st_mode) == 0o666 & ~_umask()


def _umask() -> int:
    old = os.umask(0o022)
    os.umask(old)
    return old


@pytest.mark.skipif(shutil.which("git") is None or not (ROOT / ".git").exists(), reason="not a git checkout")
def test_local_cpu_reports_are_ignored_by_git():
    proc = subprocess.run(["git", "check-ignore", "-q", "results/cpu/adaln_projection.cpu.0123abc.json"], cwd=ROOT)
    assert proc.returncode == 0
    proc = subprocess.run(["git", "check-ignore", "-q", "results/h200/history/adaln_projection/adaln_projection.h200.0123abc.json"], cwd=ROOT)
    assert proc.returncode == 1  # committed reports stay tracked


def test_the_environment_variable_table_lists_exactly_what_the_package_reads():
    """A variable added to the code without a row in docs/environment-variables.md fails here, and so does a row
    left behind for a variable the code no longer reads."""
    import re

    used = {m for f in (ROOT / "adaln_bench").rglob("*.py")
            for m in re.findall(r"ADALN_BENCH_[A-Z0-9_]+", f.read_text(encoding="utf-8"))}
    page = (ROOT / "docs" / "environment-variables.md").read_text(encoding="utf-8")
    rows = [line for line in page.splitlines() if line.startswith("| `")]
    listed = {m for line in rows for m in re.findall(r"`(ADALN_BENCH_[A-Z0-9_]+)`", line.split(" | ")[0])}
    assert used, "no ADALN_BENCH_ variable found in the package: the search itself is broken"
    assert sorted(used - listed) == [], "read by the package but not in docs/environment-variables.md"
    assert sorted(listed - used) == [], "in docs/environment-variables.md but read nowhere in the package"
