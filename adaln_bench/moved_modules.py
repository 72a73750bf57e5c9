"""Module paths that moved, kept importable under their old names: the old name is an alias of the new module.

An alias is a name, not an import of the lower layer's: `adaln_bench.kernels.registry` (where candidates lived
before there were operators) names a module of the operators' layer without kernels/ importing ops/. Importing
an old name warns with the new module's `DEPRECATION` text, every time it is imported afresh.
"""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import warnings

# old module name -> the module it now is (tools/import_layers.py reads this table, to check the new one).
MOVED: dict[str, str] = {
    "adaln_bench.kernels.registry": "adaln_bench.ops.legacy_registry",
}


class _Alias(importlib.abc.Loader):
    def __init__(self, target: str):
        self.target = target

    def exec_module(self, module) -> None:
        new = importlib.import_module(self.target)
        module.__dict__.update({k: v for k, v in vars(new).items() if not k.startswith("__")})
        message = getattr(new, "DEPRECATION", None)
        if message:
            warnings.warn(message, DeprecationWarning, stacklevel=2)


class _MovedFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path=None, target=None):
        if fullname not in MOVED:
            return None
        return importlib.machinery.ModuleSpec(fullname, _Alias(MOVED[fullname]))


def install() -> None:
    if not any(isinstance(f, _MovedFinder) for f in sys.meta_path):
        sys.meta_path.append(_MovedFinder())
