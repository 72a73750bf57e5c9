"""The cache steps every bundled library shares: a cached build is reused, a new one appears all at once.

A build writes into a temporary folder beside its final one and renames it into place, so a process that
finds the folder finds a whole library; two processes building at once both succeed (the loser's rename
fails and the winner's library is there).
"""
from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Callable, Optional, TypeVar

R = TypeVar("R")


def cached_meta(final: Path, lib_name: str) -> Optional[dict]:
    """The meta.json of the library cached at `final` (empty when it has none), or None when it is not built."""
    if not (final / lib_name).exists():
        return None
    meta = json.loads((final / "meta.json").read_text()) if (final / "meta.json").exists() else {}
    meta["prebuilt_or_cached"] = True
    return meta


def build_atomically(final: Path, lib_name: str, compile_into: Callable[[Path], R]) -> R:
    """compile_into(a temporary folder beside `final`), then that folder renamed to `final`; its result."""
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=final.name + ".tmp-", dir=final.parent))
    try:
        result = compile_into(tmp)
        try:
            os.rename(tmp, final)
        except OSError:
            if not (final / lib_name).exists():  # a concurrent build may have won the race; else a real error
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return result
