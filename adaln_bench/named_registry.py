"""A table of entries by name (modes, candidates), filled by the modules that define them when first read.

The built-in modules are imported on the first lookup, not at `import adaln_bench`, so that listing the
commands stays cheap. A built-in module that does not exist yet is skipped; one that exists but fails to
import (a dependency it should have guarded) is a bug and raises.
"""
from __future__ import annotations

import importlib
from typing import Generic, Protocol, TypeVar


class _Named(Protocol):
    name: str


T = TypeVar("T", bound=_Named)


class NamedRegistry(Generic[T]):
    def __init__(self, kind: str, builtin_modules: tuple[str, ...]):
        self.kind, self.builtin_modules = kind, builtin_modules
        self.entries: dict[str, T] = {}

    def register(self, entry: T) -> T:
        if entry.name in self.entries:
            raise ValueError(f"{self.kind} {entry.name!r} is registered twice")
        self.entries[entry.name] = entry
        return entry

    def load(self) -> dict[str, T]:
        """Every entry, the built-in modules imported first, in registration order."""
        for module in self.builtin_modules:
            try:
                importlib.import_module(module)
            except ModuleNotFoundError as exc:
                if exc.name != module:
                    raise
        return dict(self.entries)
