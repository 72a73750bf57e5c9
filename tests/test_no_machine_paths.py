"""No tracked code, doc or test names a path of one particular machine: a user's home, a CI runner's or a
development box's working folder. Reports' own recorded data (results/**/*.json: the argv and interpreter
paths of the run that wrote them) is what happened and stays as written. Scratch folders a tool creates for
itself (its default `/tmp/site`, `/tmp/out`) name no machine and are not looked for."""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Spelled in pieces so that this file does not name them itself.
_ROOTS = ["wo" + "rk", "ro" + "ot", "mn" + "t", "scr" + "atch"]
MACHINE_PATH = re.compile(
    r"(?<![\w.$~-])(?:/(?:" + "|".join(_ROOTS) + r")/[\w.-]"  # a development box's or CI runner's folders
    r"|/(?:ho" + r"me|Us" + r"ers)/[a-z][\w.-]*/"  # a named user's home
    r"|[A-Z]:\\Us" + r"ers\\)")

SKIP_DIRS = {".git", "__pycache__", ".pytest_cache", "build", "dist", ".venv", ".kernel-cache", ".carry",
             ".adaln-envs", ".whl", "node_modules"}
TEXT_SUFFIXES = {".py", ".md", ".sh", ".toml", ".yml", ".yaml", ".cu", ".cuh", ".h", ".cfg", ".txt", ".lock",
                 ".files", ".json", ""}


def _candidates() -> list[Path]:
    """git's tracked files where this is a checkout, else every file of the tree."""
    import shutil
    import subprocess

    if shutil.which("git") and (ROOT / ".git").exists():
        proc = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, timeout=60)
        if proc.returncode == 0:
            return [ROOT / name for name in proc.stdout.decode().split("\0") if name]
    return sorted(ROOT.rglob("*"))


def tracked_text_files() -> list[Path]:
    out = []
    for path in _candidates():
        rel = path.relative_to(ROOT)
        if any(part in SKIP_DIRS or part.endswith(".egg-info") for part in rel.parts) or not path.is_file():
            continue
        if rel.parts[0] == "results" and path.suffix == ".json":
            continue  # a report's own record of its run
        if path.suffix in TEXT_SUFFIXES:
            out.append(path)
    return out


def machine_paths(text: str) -> list[str]:
    return [m.group(0) for m in MACHINE_PATH.finditer(text)]


def test_the_pattern_finds_machine_paths_and_leaves_the_rest():
    found = machine_paths("see /" + "work/shared/reference and /" + "home/alice/x and /" + "root/out/family "
                          "and C:\\" + "Users\\bob\\x")
    assert len(found) == 4
    assert machine_paths("results/h200/x.json $HOME/stage ~/x /tmp/site https://example.org/work/x "
                         "adaln_bench/work/y tests/root/z") == []


def test_no_tracked_file_names_a_path_of_one_machine():
    files = tracked_text_files()
    assert len(files) > 100
    hits = []
    for path in files:
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        for n, line in enumerate(text.splitlines(), 1):
            if machine_paths(line):
                hits.append(f"{path.relative_to(ROOT)}:{n}: {', '.join(machine_paths(line))}")
    assert hits == []
