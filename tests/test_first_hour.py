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

    from adaln_bench.reports.io import read_report
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

    from adaln_bench.reports.io import read_report
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
