"""What a newcomer reads first: README.md stays short, and every command, option, extra and link it names exists."""
import re

import click
import pytest
import typer

from conftest import ROOT

from adaln_bench.cli import app

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

README = (ROOT / "README.md").read_text(encoding="utf-8")
MAX_BYTES = 8 * 1024


def _commands() -> dict[str, click.Command]:
    """Every command by its full name ("run", "envs create"), groups included."""
    found: dict[str, click.Command] = {}

    def walk(group: click.Command, prefix: str) -> None:
        for name, sub in getattr(group, "commands", {}).items():
            found[prefix + name] = sub
            walk(sub, prefix + name + " ")

    walk(typer.main.get_command(app), "")
    return found


COMMANDS = _commands()


def _options(command: click.Command) -> set[str]:
    return {o for p in command.params for o in (*p.opts, *p.secondary_opts) if o.startswith("-")}


def _mentions() -> list[tuple[list[str], list[str]]]:
    """(command words, options) for each `adaln-bench ...` in the README's code blocks, code spans and table rows."""
    blocks = re.findall(r"```[a-z]*\n(.*?)```", README, flags=re.S)
    prose = re.sub(r"```[a-z]*\n.*?```", "", README, flags=re.S)
    pieces = [line for block in blocks for line in block.splitlines()] + re.findall(r"`([^`\n]+)`", prose)
    # a table row names its command in its first cell and may name options of that command after it
    pieces += [" ".join(re.findall(r"`([^`]+)`", line)) for line in prose.splitlines()
               if line.startswith("| `adaln-bench ")]
    mentions = []
    for piece in pieces:
        for part in piece.split("adaln-bench")[1:]:
            tokens = re.split(r"\s+", part.strip())
            words = []
            while tokens and re.fullmatch(r"[a-z][a-z-]*", tokens[0]):
                words.append(tokens.pop(0))
            options = []
            for token in tokens:
                if token in ("&&", "||", "|", ";"):
                    break
                options += re.findall(r"^(--?[a-zA-Z][\w-]*)", token)
            mentions.append((words, options))
    return mentions


def _resolve(words: list[str]) -> str:
    """The longest prefix of `words` that is a command ("envs create" before "envs")."""
    for n in range(len(words), 0, -1):
        name = " ".join(words[:n])
        if name in COMMANDS:
            return name
    return ""


def test_the_readme_is_at_most_8_kb():
    size = len(README.encode("utf-8"))
    assert size <= MAX_BYTES, f"README.md is {size} bytes; the limit is {MAX_BYTES}: move details to docs/"


def test_the_readme_names_commands_at_all():
    # guards the parser below: a README whose mentions it cannot find would pass the next test vacuously
    named = {_resolve(words) for words, _ in _mentions()}
    assert {"run", "diff", "report", "kernel-bench"} <= named


def test_every_command_and_option_the_readme_names_exists():
    wrong = []
    for words, options in _mentions():
        if not words:  # the bare program name
            continue
        name = _resolve(words)
        if not name:
            wrong.append(f"adaln-bench {' '.join(words)}: no such command")
            continue
        known = _options(COMMANDS[name]) | {"--help"}
        wrong += [f"adaln-bench {name} {o}: no such option" for o in options if o not in known]
    assert not wrong, "\n".join(wrong)


def test_every_option_the_readme_names_belongs_to_some_command():
    every = set().union(*(_options(c) for c in COMMANDS.values())) | {"--help"}
    named = set(re.findall(r"`(--[a-z][\w-]*)", README))
    assert named, "the README names no option: the search itself is broken"
    assert sorted(named - every) == []


def test_every_extra_the_readme_installs_exists():
    extras = set(tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
                 ["optional-dependencies"])
    named = {e.strip() for group in re.findall(r"\.\[([\w,\s-]+)\]", README) for e in group.split(",")}
    assert named, "the README installs no extra"
    assert sorted(named - extras) == []


@pytest.mark.parametrize("target", sorted(set(re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", README))))
def test_every_file_the_readme_links_to_exists(target):
    if re.match(r"[a-z]+://", target):
        pytest.skip("an external link")
    assert (ROOT / target).exists(), f"README.md links to {target}, which is not in the repository"


def test_the_readme_carries_no_commit_hash():
    # a figure tied to one commit belongs in docs/ beside the command that reproduces it, not in the README
    hashes = [h for h in re.findall(r"\b[0-9a-f]{7,40}\b", README)
              if re.search(r"[a-f]", h) and re.search(r"[0-9]", h)]
    assert not hashes
