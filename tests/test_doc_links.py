"""The docs hold together: every `docs/<page>.md#section` the code, tests and docs cite names a heading of that page,
and every relative link between the docs points to a file of the repository."""
import re
import subprocess

import pytest

from conftest import ROOT

DOCS = ROOT / "docs"


def anchor(heading: str) -> str:
    """The anchor GitHub makes of a heading: lower case, punctuation dropped but for - and _, spaces to -."""
    text = re.sub(r"[`*]", "", heading.lstrip("#").strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(page) -> set[str]:
    return {anchor(line) for line in page.read_text(encoding="utf-8").splitlines()
            if re.match(r"#{1,6} ", line)}


def tracked_text_files() -> list:
    names = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True).stdout.split()
    keep = (".py", ".md", ".cu", ".cuh", ".h", ".sh", ".toml", ".yml")
    return [ROOT / n for n in names if n.endswith(keep) and not n.startswith("results/")]


def test_the_anchor_rule_on_headings_like_ours():
    assert anchor("### 10.3 adaln_projection") == "103-adaln_projection"
    assert anchor("## 4. Batch-invariance probes") == "4-batch-invariance-probes"
    assert anchor("## What a B200 gets today") == "what-a-b200-gets-today"


@pytest.mark.skipif(not (ROOT / ".git").exists(), reason="not a git checkout")
def test_every_cited_section_of_a_doc_exists():
    known = {page.name: anchors(page) for page in DOCS.glob("*.md")}
    missing = []
    for path in tracked_text_files():
        text = path.read_text(encoding="utf-8", errors="replace")
        for page, first in re.findall(r"(?<![\w/])(?:docs/)?([\w-]+\.md)#([\w-]+)", text):
            if page not in known:
                continue  # another folder's page (results/README.md and the like) or a page not in docs/
            # "docs/spec.md#3-inputs, #32-the-packed-layout": a second anchor of the same page may follow
            if first not in known[page]:
                missing.append(f"{path.relative_to(ROOT)}: {page}#{first}")
    assert not missing, "\n".join(missing)


@pytest.mark.parametrize("page", sorted(p.name for p in DOCS.glob("*.md")))
def test_every_relative_link_of_a_doc_points_to_a_file(page):
    text = (DOCS / page).read_text(encoding="utf-8")
    wrong = []
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text):
        if re.match(r"[a-z]+:", target):
            continue
        if not (DOCS / target).resolve().exists():
            wrong.append(target)
    assert not wrong, f"docs/{page} links to files that are not there: {wrong}"


@pytest.mark.skipif(not (ROOT / ".git").exists(), reason="not a git checkout")
def test_no_file_points_to_a_notes_file_that_is_gone():
    """The kernels' diaries left the tree for docs/kernels.md; a comment may still cite their git history as
    `git:NOTES.md "<section>"`, never as a file to open."""
    stale = []
    for path in tracked_text_files():
        if path.name == "test_doc_links.py":  # this test's own pattern
            continue
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            for match in re.finditer(r"(?<![\w:/-])(?:[\w/]+/)?NOTES(?:\.md)?\b", line):
                if not (ROOT / match.group(0)).exists() and "git log" not in line:
                    stale.append(f"{path.relative_to(ROOT)}: {line.strip()[:100]}")
    assert not stale, "\n".join(stale)
