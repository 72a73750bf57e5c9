"""`adaln-bench summary`: results/README.md is what the committed reports give, and --check says when not."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from tests.conftest import run_main

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "results"


def test_the_committed_results_readme_is_what_the_reports_give():
    # In a fresh process, as a user runs it: the mode order comes from the registry, which other tests in a
    # shared worker may have changed.
    code = ("import sys; from pathlib import Path; from adaln_bench.reports.summary import summary_markdown; "
            "sys.stdout.write(summary_markdown(Path(sys.argv[1]), repo=Path(sys.argv[2])))")
    made = subprocess.run([sys.executable, "-c", code, str(RESULTS), str(ROOT)], capture_output=True, text=True,
                          encoding="utf-8", cwd=ROOT, check=True).stdout
    committed = (RESULTS / "README.md").read_text(encoding="utf-8")
    assert committed == made, "results/README.md is stale: run `adaln-bench summary` and commit it"


def test_it_writes_the_file_and_check_fails_on_any_difference(tmp_path, capsys):
    results = tmp_path / "results"
    for name in ("timestep_sinusoid.h200.f51093c.h3.plain.json", "timestep_sinusoid.h200.fd00ad3.h3.plain.json"):
        src = next(RESULTS.rglob(name))
        dest = results / src.relative_to(RESULTS)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(src, dest)
    code, out, _ = run_main(["summary", str(results), "--check"], capsys)
    assert code == 1  # no README.md yet
    assert run_main(["summary", str(results)], capsys)[0] == 0
    text = (results / "README.md").read_text(encoding="utf-8")
    # Only the current report's rows: the older one, kept as history, is not an answer.
    assert "f51093c" in text and "fd00ad3" not in text and "| plain | sglang | yes |" in text
    assert run_main(["summary", str(results), "--check"], capsys)[0] == 0
    (results / "README.md").write_text(text.replace("| yes |", "| no |", 1), encoding="utf-8")
    code, _, err = run_main(["summary", str(results), "--check"], capsys)
    assert code == 1 and "is not what the reports give" in err


def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys):
    code, _, err = run_main(["summary", str(tmp_path / "absent")], capsys)
    assert code == 2 and err.strip().endswith("no such directory")
    code, _, err = run_main(["summary", str(tmp_path)], capsys)
    assert code == 2 and "no current reports" in err and not (tmp_path / "README.md").exists()
