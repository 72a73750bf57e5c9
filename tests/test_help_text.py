"""What `--help` says: one uncut line per command at the top, option values named by metavars (never a
Python type such as `<list[str]>`), and `report` speaking of the rows an operator has (T or S)."""
from __future__ import annotations

import re

import pytest

from adaln_bench import cli
from conftest import run_main

# Every command the app registers, in its order, then the `envs` group.
COMMANDS = [name for name, _command, _short in cli.COMMANDS] + ["envs"]


def _help(argv: list[str], capsys, monkeypatch) -> str:
    monkeypatch.setenv("COLUMNS", "80")
    code, out, err = run_main([*argv, "--help"], capsys)
    assert code == 0, err
    return out


def _commands_section(text: str) -> list[str]:
    return [line for line in text.split("Commands:", 1)[1].splitlines() if line.strip()]


def test_top_level_help_gives_every_command_one_uncut_line(capsys, monkeypatch):
    lines = _commands_section(_help([], capsys, monkeypatch))
    named = [line.split()[0] for line in lines]
    assert named == COMMANDS  # one line each: a wrapped description would start a line of its own
    for line in lines:
        assert len(line) <= 80 and "…" not in line and not line.rstrip().endswith("..."), line


def test_envs_help_gives_each_subcommand_one_uncut_line(capsys, monkeypatch):
    lines = _commands_section(_help(["envs"], capsys, monkeypatch))
    assert [line.split()[0] for line in lines] == ["create", "list"]
    assert not any(line.rstrip().endswith(("...", "…")) for line in lines)


@pytest.mark.parametrize("argv", [[c] for c in COMMANDS if c != "envs"] + [["envs", "create"], ["envs", "list"]],
                         ids=lambda argv: " ".join(argv))
def test_no_python_type_names_a_list(argv, capsys, monkeypatch):
    text = _help(argv, capsys, monkeypatch)
    assert not re.search(r"<list\[|list\[(str|Path)\]", text), text


def test_report_help_speaks_of_t_or_s(capsys, monkeypatch):
    text = " ".join(_help(["report"], capsys, monkeypatch).split())
    assert "T = 3, 256, 2048" in text and "S (tokens)" in text
