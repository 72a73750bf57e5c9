"""Issue 30's smaller things: what a newcomer met in the first hour, each case as they ran it."""
from __future__ import annotations

from conftest import run_main


def test_help_text_keeps_square_brackets(capsys):
    # typer's rich markup took `[plot]` for a style tag and printed `pip install 'adaln-bench'`.
    code, out, _ = run_main(["plot", "--help"], capsys)
    assert code == 0 and "adaln-bench[plot]" in out
    code, out, _ = run_main(["envs", "create", "--help"], capsys)
    assert code == 0 and "[pins]" in out
