"""A git revision's folders, read without a checkout: the committed reports `adaln-bench compare` chooses from.

Paths given on the command line are made git's (from the repository's root), so that `REV:path` names the
same folder from any subdirectory, and a working tree at any commit reads the same revision.
"""
from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from adaln_bench.errors import UserError


def _git(args: list[str], cwd: Path) -> Optional[str]:
    """git's stdout, or None when it fails (an unknown revision or path)."""
    try:
        proc = subprocess.run(["git", *args], cwd=cwd, capture_output=True, timeout=60, check=False)
    except FileNotFoundError:
        raise UserError("compare reads the baselines from git, and the git command is not installed") from None
    except subprocess.TimeoutExpired:
        raise UserError(f"git {' '.join(args)} did not answer within 60 s") from None
    return proc.stdout.decode("utf-8", "replace") if proc.returncode == 0 else None


@dataclass(frozen=True)
class Repository:
    """The git checkout around the current directory."""

    root: Path
    prefix: str  # the current directory inside the repository, "" at its root

    @classmethod
    def here(cls) -> "Repository":
        top = _git(["rev-parse", "--show-toplevel"], Path.cwd())
        if top is None:
            raise UserError("compare reads the baselines from git: run it inside the repository")
        prefix = _git(["rev-parse", "--show-prefix"], Path.cwd()) or ""
        return cls(Path(top.strip()), prefix.strip())

    def git_path(self, path: str) -> str:
        if os.path.isabs(path):
            joined = os.path.relpath(Path(path).resolve(), self.root.resolve()).replace(os.sep, "/")
        else:
            joined = os.path.normpath(os.path.join(self.prefix, path)).replace(os.sep, "/")
        if joined.startswith("../") or joined == "..":
            raise UserError(f"{path}: outside the repository")
        return "" if joined == "." else joined

    def commit(self, rev: str) -> str:
        if rev.startswith("-") or _git(["rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"], self.root) is None:
            raise UserError(f"{rev}: not a revision of this repository")
        return rev

    def is_tree(self, spec: str) -> bool:
        return (_git(["cat-file", "-t", spec], self.root) or "").strip() == "tree"

    def exists(self, rev: str, path: str) -> bool:
        return _git(["cat-file", "-e", f"{rev}:{path}"], self.root) is not None

    def files_in(self, rev: str, folder: str) -> list[str]:
        """The files committed directly in a folder at a revision (not in its subfolders), git paths."""
        out = _git(["ls-tree", "-z", "--full-tree", rev, "--", f"{folder}/"], self.root) or ""
        files = []
        for entry in filter(None, out.split("\0")):
            meta, _, path = entry.partition("\t")
            if meta.split()[1:2] == ["blob"]:
                files.append(path)
        return sorted(files)
