"""The operator registry: every operator of the model the harness measures, one folder each, found, not listed.

A folder is an operator when its `__init__.py` declares one (`OPERATOR = register(Operator(...))`); its `candidates`
module, if any, registers its candidates. The folders are searched for in three places, in this order:
the sub-packages of adaln_bench/ops/, the folders named by ADALN_BENCH_OPERATOR_PATH (directories of operator
packages, separated like PATH), and the packages named by the `adaln_bench.operators` entry-point group.
Operators are listed in their declared `pipeline_position` (docs/adding-an-operator.md). Listing them imports
their folders, which import no optional library.
"""
from __future__ import annotations

import importlib
import importlib.util
import os
import pkgutil
import sys
from pathlib import Path

from adaln_bench.errors import UserError
from adaln_bench.ops.spec import Operator

PATH_VARIABLE = "ADALN_BENCH_OPERATOR_PATH"
ENTRY_POINT_GROUP = "adaln_bench.operators"

_OPERATORS: dict[str, Operator] = {}
_PACKAGES: dict[str, str] = {}  # operator name -> the package that declared it
_loaded = False


def register(op: Operator) -> Operator:
    if op.name in _OPERATORS:
        raise ValueError(f"operator {op.name!r} is registered twice")
    _OPERATORS[op.name] = op
    return op


def _import_operator_package(package: str, folder: Path | None = None) -> None:
    """Import the folder and, when it declares an operator (`OPERATOR = register(Operator(...))`), its
    candidates; a folder that declares none is a helper package, not an operator. `folder`: where the package
    must come from (a search-path folder, which a module of the same name elsewhere would shadow)."""
    module = importlib.import_module(package)
    if folder is not None and Path(module.__file__ or "").resolve().parent != folder / package:
        raise UserError(f"{PATH_VARIABLE}: {folder / package} is shadowed by the module {package!r} of "
                        f"{module.__file__}; rename the folder")
    op = getattr(module, "OPERATOR", None)
    if not isinstance(op, Operator) or _OPERATORS.get(op.name) is not op:
        return
    _PACKAGES[op.name] = package
    if importlib.util.find_spec(f"{package}.candidates") is not None:
        importlib.import_module(f"{package}.candidates")


def builtin_packages() -> list[str]:
    import adaln_bench.ops as ops

    return [f"{ops.__name__}.{m.name}" for m in pkgutil.iter_modules(ops.__path__) if m.ispkg]


def search_path_packages() -> list[tuple[str, Path]]:
    """The operator packages in the folders of ADALN_BENCH_OPERATOR_PATH, each with its folder; each folder goes
    on sys.path so that its packages import by their own names (in the children too, which inherit the
    variable)."""
    packages = []
    for entry in filter(None, os.environ.get(PATH_VARIABLE, "").split(os.pathsep)):
        folder = Path(entry).resolve()
        if not folder.is_dir():
            raise UserError(f"{PATH_VARIABLE}: {entry} is not a directory")
        if str(folder) not in sys.path:
            sys.path.append(str(folder))
        packages += sorted((p.name, folder) for p in folder.iterdir() if (p / "__init__.py").is_file())
    return packages


def entry_point_packages() -> list[tuple[str, None]]:
    from importlib.metadata import entry_points

    return [(ep.value.split(":", 1)[0], None) for ep in entry_points(group=ENTRY_POINT_GROUP)]


def load_operators() -> None:
    global _loaded
    if _loaded:
        return
    _loaded = True  # before importing: a folder that lists the operators while it loads sees those so far
    try:
        for package in builtin_packages():
            _import_operator_package(package)
        for package, folder in search_path_packages() + entry_point_packages():
            try:
                _import_operator_package(package, folder)
            except UserError:
                raise
            except Exception as exc:  # another package's code: its failure is one line, naming it
                raise UserError(f"operator package {package!r}: {type(exc).__name__}: {exc}") from None
    except BaseException:
        _loaded = False  # a broken folder keeps failing, not half-listed
        raise


def all_operators() -> dict[str, Operator]:
    """Every operator, in the model's pipeline order (from the timestep embedding to the final norm)."""
    load_operators()
    ordered = sorted(_OPERATORS.values(), key=lambda op: (op.pipeline_position, op.name))
    return {op.name: op for op in ordered}


def operator_package(name: str) -> str:
    """The package (folder) that declared operator `name`: its pins and candidates live there."""
    get_operator(name)
    if name not in _PACKAGES:
        raise UserError(f"operator {name!r} is registered, but by no folder's OPERATOR")
    return _PACKAGES[name]


def get_operator(name: str) -> Operator:
    ops = all_operators()
    if name not in ops:
        raise UserError(f"unknown operator {name!r}; known operators: {', '.join(ops)}")
    return ops[name]
