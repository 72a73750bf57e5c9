"""Where built libraries are kept, and the steps that keep the cache whole: a cached build is reused, a new one
appears all at once.

The cache is ``$ADALN_BENCH_KERNEL_CACHE`` or ``~/.cache/adaln_bench/kernels``, one folder a library and target:
``<name>-<arch>-<key>`` (recipe.cache_key). A build writes into a temporary folder beside its final one and
renames it into place, so a process that finds the folder finds a whole library; two processes building at once
both succeed (the loser's rename fails and the winner's library is there).
"""
from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Callable, Optional, TypeVar

from adaln_bench.kernels.toolchain.compile import Log, compile_library, missing
from adaln_bench.kernels.toolchain.errors import BuildError
from adaln_bench.kernels.toolchain.recipe import Recipe, cache_key

R = TypeVar("R")


def cache_root() -> Path:
    chosen = os.environ.get("ADALN_BENCH_KERNEL_CACHE")
    return Path(chosen).expanduser() if chosen else Path.home() / ".cache" / "adaln_bench" / "kernels"


def library_dir(recipe: Recipe, root: Optional[Path] = None) -> Path:
    """The folder that holds (or will hold) this recipe's library."""
    return (root or cache_root()) / f"{recipe.name}-{recipe.arch}-{cache_key(recipe)}"


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


def ensure_library(recipe: Recipe, log: Log = None) -> tuple[Path, dict]:
    """The cached library of this recipe and its build record, built (atomically) when it is not there yet.
    A cached one is used as it is: no nvcc or headers needed (prebuilt and carried)."""
    final = library_dir(recipe)
    meta = cached_meta(final, recipe.lib_name)
    if meta is not None:
        return final / recipe.lib_name, meta
    problem = missing(recipe)
    if problem:
        raise BuildError(f"no cached library at {final} and cannot build one: {problem}")
    meta = build_atomically(final, recipe.lib_name, lambda tmp: compile_library(recipe, tmp, log=log))
    meta["prebuilt_or_cached"] = False
    return final / recipe.lib_name, meta


def unavailable(recipe: Recipe) -> Optional[str]:
    """None when the library is cached or this machine can build it; else why not (a candidate's availability)."""
    if (library_dir(recipe) / recipe.lib_name).exists():
        return None
    problem = missing(recipe)
    return f"no prebuilt {recipe.name} library for {recipe.arch} in {cache_root()} and {problem}" if problem else None
