"""Importing a framework's batch-invariant module: the paths real releases use, versions, source checkouts.

Shared by the vllm, sglang and megatron modes. Everything here runs in a mode's child process.
"""
from __future__ import annotations

import hashlib
import importlib
import importlib.metadata
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Optional, Sequence


def _is_missing(exc: ModuleNotFoundError, module: str) -> bool:
    """True when `exc` says `module` itself (or a package above it) does not exist.

    A ModuleNotFoundError for anything else (vLLM's compiled extension, triton, transformer_engine)
    comes from inside a module that does exist, and is the reason the mode is unavailable.
    """
    if not exc.name:
        return False
    return module == exc.name or module.startswith(exc.name + ".")


def import_first(library: str, top: str, paths: Sequence[str]) -> ModuleType:
    """Import the first of `paths` that exists; raise ModuleNotFoundError naming the library if none does.

    `library` is the pip name, `top` its top-level package. An error raised while importing a module
    that exists propagates unchanged.
    """
    try:
        importlib.import_module(top)
    except ModuleNotFoundError as exc:
        if _is_missing(exc, top):
            raise ModuleNotFoundError(f"{library} is not installed (no module named {top!r})", name=top) from None
        raise
    for path in paths:
        try:
            return importlib.import_module(path)
        except ModuleNotFoundError as exc:
            if not _is_missing(exc, path):
                raise
    version = library_version(library, top) or "unknown version"
    tried = " nor ".join(paths) if len(paths) == 2 else ", ".join(paths)
    raise ModuleNotFoundError(
        f"{library} {version} (from {_origin(top)}) has no batch-invariant module: tried {tried}",
        name=paths[0],
    )


def _origin(top: str) -> str:
    module = sys.modules.get(top)
    file = getattr(module, "__file__", None)
    if file:
        return str(Path(file).parent)
    paths = list(getattr(module, "__path__", []) or [])
    return paths[0] if paths else "?"


def library_version(library: str, top: str, version_module: Optional[str] = None) -> Optional[str]:
    """The version of the package actually imported.

    `version_module` (e.g. "megatron.core.package_info") is read first, so that a source checkout put
    ahead on sys.path reports its own version rather than that of an installed distribution.
    """
    for name in filter(None, (version_module, top)):
        try:
            module = importlib.import_module(name)
        except Exception:  # a version lookup must never hide the real result
            continue
        version = getattr(module, "__version__", None)
        if isinstance(version, str) and version:
            return version
    try:
        return importlib.metadata.version(library)
    except importlib.metadata.PackageNotFoundError:
        return None


def module_file(module: ModuleType) -> str:
    return str(getattr(module, "__file__", None) or "?")


def defining_file(function: object) -> Optional[str]:
    """The source file of the module that defines `function`: the code a switch really runs.

    SGLang's package re-exports its switch from an inner module, so the package's own __init__.py would
    say little about which code ran.
    """
    module = sys.modules.get(getattr(function, "__module__", None) or "")
    file = getattr(module, "__file__", None)
    return str(file) if file else None


def file_sha256(path: Optional[str]) -> Optional[str]:
    """SHA-256 (hex) of a file's bytes, so that a report can be checked against a wheel's RECORD.

    A stand-in can carry the same version string as the real library; its file cannot carry the same hash.
    """
    if not path:
        return None
    try:
        with open(path, "rb") as handle:
            return hashlib.sha256(handle.read()).hexdigest()
    except OSError:
        return None


def prepend_source(path: str) -> Path:
    """Put a source checkout first on sys.path, so that its packages win over installed ones."""
    src = Path(path).expanduser().resolve()
    if not src.is_dir():
        raise FileNotFoundError(f"source checkout {path!r} is not a directory")
    text = str(src)
    if text in sys.path:
        sys.path.remove(text)
    sys.path.insert(0, text)
    importlib.invalidate_caches()
    return src


def git_commit(path: Path) -> Optional[str]:
    """`git rev-parse --short HEAD` of a checkout; None when it is not a git checkout or git is missing.

    Only the root of a checkout counts: a folder inside some other repository would report that
    repository's commit, which says nothing about the source imported from the folder.
    """
    if not (path / ".git").exists():  # a folder for a clone, a file for a worktree or submodule
        return None
    try:
        result = subprocess.run(
            ["git", "-C", str(path), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    commit = result.stdout.strip()
    return commit if result.returncode == 0 and commit else None


def describe_call(module: ModuleType, function: str, kwargs: Optional[dict[str, object]] = None) -> str:
    """`pkg.mod.fn(backend='triton')`: the call that switched the mode on, as the report shows it."""
    args = ", ".join(f"{k}={v!r}" for k, v in (kwargs or {}).items())
    return f"{module.__name__}.{function}({args})"
