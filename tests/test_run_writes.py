"""Where `run` writes: an --out it cannot write is refused before anything runs, kept reports never replace each
other, and names that cannot be file names are refused up front."""
import json
import time
from pathlib import Path

import pytest

from conftest import ROOT, run_main

from adaln_bench.errors import UserError
from adaln_bench.datamodel import io as report_io
from adaln_bench.datamodel.io import check_writable, read_report, write_report_or_keep

TINY = ("run", "--device", "cpu", "--preset", "tiny", "--quick", "--quiet", "--no-cold-start", "--mode", "plain")
# /proc takes no new files, whatever the user: root included, for whom os.access says every path is writable.
UNWRITABLE = Path("/proc/adaln-bench-unwritable")


@pytest.mark.parametrize("directory", [True, False])
def test_a_folder_that_takes_no_file_is_found_by_trying(directory):
    target = UNWRITABLE if directory else UNWRITABLE / "r.json"
    with pytest.raises(UserError, match="cannot write there"):
        check_writable(target, directory=directory)


def test_the_probe_leaves_nothing_behind(tmp_path):
    assert check_writable(tmp_path / "new" / "deeper", directory=True) == tmp_path / "new" / "deeper"
    assert check_writable(tmp_path / "r.json") == tmp_path / "r.json"
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("out", [UNWRITABLE, UNWRITABLE / "r.json"])
def test_run_refuses_an_unwritable_out_before_anything_runs(out, capsys):
    started = time.monotonic()
    code, _, err = run_main([*TINY, "--out", str(out)], capsys)
    assert code == 2, err
    assert time.monotonic() - started < 30
    assert err.count("\n") == 1 and "cannot write there" in err


def _report():
    return read_report(next((ROOT / "results").rglob("adaln_projection.h200.fd00ad3.h3.plain.json")))


def test_two_kept_reports_keep_both(tmp_path, monkeypatch):
    import tempfile

    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    monkeypatch.setattr(tempfile, "tempdir", None)
    (tmp_path / "tmp").mkdir()
    real = report_io.write_text_atomic
    target = UNWRITABLE / "r.json"
    first, second = _report(), _report()
    second.wall_s = 1.0
    kept = [write_report_or_keep(r, target) for r in (first, second)]
    paths = [k.path for k in kept]
    assert all(k.error and str(target) in k.error for k in kept)
    assert paths[0] != paths[1] and all(p.parent.name == "adaln-bench-kept" for p in paths)
    assert [json.loads(p.read_text())["wall_s"] for p in paths] == [first.wall_s, 1.0]
    assert all(p.name.startswith("r.") and p.name.endswith(".json") for p in paths)
    assert report_io.write_text_atomic is real


@pytest.mark.parametrize("recipes, message", [
    (f'[recipes.{"r" * 300}]\nenv = {{ A = "1" }}\n', "at most 64"),
    ('[recipes."a/b"]\nenv = { A = "1" }\n', "must be letters"),
    ("recipes = { e = 1 }\n", "recipes.e must be a table"),
])
def test_a_recipe_name_that_cannot_be_a_file_name_or_a_recipe_that_is_no_table_is_refused(tmp_path, capsys,
                                                                                         recipes, message):
    modes = tmp_path / "modes.toml"
    modes.write_text(recipes)
    code, _, err = run_main([*TINY[:-2], "--modes-file", str(modes), "--out", str(tmp_path / "out")], capsys)
    assert code == 2 and message in err and err.count("\n") == 1, err
    assert not (tmp_path / "out").exists()


def test_a_run_whose_report_name_would_be_too_long_is_refused_up_front(tmp_path, capsys):
    names = [f"r{i}_{'x' * 50}" for i in range(6)]
    modes = tmp_path / "modes.toml"
    modes.write_text("".join(f'[recipes.{n}]\nenv = {{ A = "1" }}\n' for n in names))
    argv = [*TINY[:-2], "--modes-file", str(modes), "--out", str(tmp_path / "out")]
    for n in names:
        argv += ["--mode", n]
    code, _, err = run_main(argv, capsys)
    assert code == 2 and "file name" in err and err.count("\n") == 1, err


def test_a_recipe_that_sets_loader_or_interpreter_variables_is_named_in_the_output(monkeypatch, capsys):
    from adaln_bench.harness.assembly.run_checks import warn_loader_variables
    from adaln_bench.modes.registry import Mode

    modes = [Mode(name="mine", description="", kind="recipe", env={"LD_PRELOAD": "x.so", "PYTHONPATH": "/p"}),
             Mode(name="fine", description="", kind="recipe", env={"CUBLAS_WORKSPACE_CONFIG": ":16:8"})]
    warn_loader_variables(modes)
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "mine" in err and "LD_PRELOAD" in err and "PYTHONPATH" in err
    assert "fine" not in err


def _run_reports(incomplete: bool):
    report = _report().model_copy(deep=True)
    report.incomplete = incomplete
    return {report.op: report}


def test_a_signal_after_the_last_mode_is_said_as_what_the_file_holds():
    from adaln_bench.harness.assembly.exit_status import closing

    code, lines = closing(_run_reports(False), None, False, 143, "stopped by SIGTERM", "SIGTERM")
    assert code == 143 and lines == ["SIGTERM arrived after the last mode had finished; the report is complete"]
    code, lines = closing(_run_reports(True), None, False, 143, "stopped by SIGTERM", "SIGTERM")
    assert code == 143 and len(lines) == 1 and lines[0].startswith("stopped by SIGTERM;") and "incomplete" in lines[0]


def test_a_report_measured_but_not_written_is_exit_5_said_once():
    from adaln_bench.harness.assembly.exit_status import closing

    failed = "/x/r.json: cannot write: No space left on device; the report was kept in /tmp/k/r.1.json"
    code, lines = closing(_run_reports(False), failed, False, None, None, "SIGINT")
    assert code == 5 and lines == [f"{failed} (exit 5)"]
