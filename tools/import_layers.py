"""The package's import layers: no circle among files or packages, and no import up a layer.

    python3 tools/import_layers.py          # exit 0 when clean; 1 with one line per problem

Every module of adaln_bench/ is parsed (nothing is imported), and every first-party import counts: at the top,
inside a function, under `if TYPE_CHECKING`, and `importlib.import_module("adaln_bench...")` with a literal name;
an old module path of adaln_bench/moved_modules.py counts as the module it now is.
A module may import modules of its own layer or of a layer below it; circles are reported among files and among
packages (a module's folder; a module directly in adaln_bench/ counts as its own). The harness's three
subpackages are layers of their own, with others between them (reports are written by the run assembly and
read nothing of the harness), so each counts as a package, and harness/ holds only them.
"""
from __future__ import annotations

import argparse
import ast
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Optional

ROOT = Path(__file__).resolve().parents[1]

# The layers, bottom first: a module is in the layer of the longest prefix naming it (names relative to
# adaln_bench; "" is the package's own __init__, which holds the version). A module in no layer is a problem,
# so a new package must be placed here.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("base", ("", "errors", "shape", "named_registry", "toml_file", "bounded_read", "moved_modules")),
    ("data model", ("datamodel",)),
    ("kernel libraries and draws", ("kernels", "draws")),
    ("operators and modes", ("ops", "modes")),
    ("measurement", ("harness.measurement", "harness")),
    ("processes", ("harness.processes",)),
    ("report readers and writers", ("reports",)),
    ("run assembly and environments", ("harness.assembly", "envs", "kernel_bench")),
    ("commands", ("commands",)),
    ("command line", ("cli", "__main__")),
]

# File circles that other work removes; each is still reported when it is not a circle any more.
KNOWN_CIRCLES: dict[frozenset[str], str] = {}


@dataclass(frozen=True)
class Import:
    source: str  # module importing, relative to the package ("" for its __init__)
    target: str
    line: int


@dataclass
class Graph:
    modules: dict[str, Path]  # relative module name -> file
    packages: set[str]  # relative names of the modules that are packages (an __init__.py)
    imports: list[Import] = field(default_factory=list)


def module_name(path: Path, package_dir: Path) -> tuple[str, bool]:
    parts = list(path.relative_to(package_dir).with_suffix("").parts)
    is_package = parts[-1] == "__init__"
    if is_package:
        parts = parts[:-1]
    return ".".join(parts), is_package


def _absolute(node: ast.ImportFrom, name: str, is_package: bool, top: str) -> str:
    module = node.module or ""
    if not node.level:
        return module
    here = [top, *name.split(".")] if name else [top]
    base = here if is_package else here[:-1]
    base = base[:len(base) - (node.level - 1)]
    return ".".join(base + ([module] if module else []))


def _named_imports(tree: ast.AST, name: str, is_package: bool, top: str) -> Iterable[tuple[str, int]]:
    """(absolute dotted name, line) of every import in the module, each `from X import a` as X.a and X."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            module = _absolute(node, name, is_package, top)
            for alias in node.names:
                yield f"{module}.{alias.name}" if alias.name != "*" else module, node.lineno
        elif (isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant)
              and isinstance(node.args[0].value, str)
              and (getattr(node.func, "attr", None) or getattr(node.func, "id", None)) == "import_module"):
            yield node.args[0].value, node.lineno


def moved_modules(package_dir: Path) -> dict[str, str]:
    """The package's table of moved modules (old name -> new module), read from its moved_modules.py: an
    import of an old name is an import of the new module."""
    path = package_dir / "moved_modules.py"
    if not path.is_file():
        return {}
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        target = node.target if isinstance(node, ast.AnnAssign) else (
            node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else None)
        if isinstance(target, ast.Name) and target.id == "MOVED" and isinstance(node.value, ast.Dict):
            return {k.value: v.value for k, v in zip(node.value.keys, node.value.values)
                    if isinstance(k, ast.Constant) and isinstance(v, ast.Constant)}
    return {}


def _resolve(dotted: str, top: str, modules: dict[str, Path], moved: dict[str, str]) -> Optional[str]:
    """The first-party module a dotted name lands in (`from pkg import name` names a module or a name of pkg)."""
    for old, new in moved.items():
        if dotted == old or dotted.startswith(old + "."):
            dotted = new + dotted[len(old):]
    if dotted != top and not dotted.startswith(top + "."):
        return None
    rel = dotted[len(top) + 1:]
    while rel not in modules:
        if not rel:
            return None
        rel = rel.rpartition(".")[0]
    return rel


def import_graph(package_dir: Path) -> Graph:
    top = package_dir.name
    graph = Graph(modules={}, packages=set())
    trees = {}
    for path in sorted(package_dir.rglob("*.py")):
        name, is_package = module_name(path, package_dir)
        graph.modules[name] = path
        if is_package:
            graph.packages.add(name)
        trees[name] = (ast.parse(path.read_text(encoding="utf-8"), filename=str(path)), is_package)
    moved = moved_modules(package_dir)
    for name, (tree, is_package) in trees.items():
        seen = set()
        for dotted, line in _named_imports(tree, name, is_package, top):
            target = _resolve(dotted, top, graph.modules, moved)
            if target is None or target == name or (target, line) in seen:
                continue
            seen.add((target, line))
            graph.imports.append(Import(name, target, line))
    return graph


def layer_of(module: str, layers: list[tuple[str, tuple[str, ...]]]) -> Optional[int]:
    best, best_len = None, -1
    for index, (_, prefixes) in enumerate(layers):
        for prefix in prefixes:
            matches = module == prefix or (prefix and module.startswith(prefix + "."))
            if matches and len(prefix) > best_len:
                best, best_len = index, len(prefix)
    return best


def package_of(module: str, graph: Graph) -> str:
    """A module's folder, as a package; a module directly in the package's folder is its own unit."""
    if module in graph.packages:
        return module or "."
    parent = module.rpartition(".")[0]
    return parent if parent else module


def circles(edges: Iterable[tuple[str, str]]) -> list[list[str]]:
    """The strongly connected components with more than one node (Tarjan), each sorted, sorted."""
    succ: dict[str, set[str]] = {}
    for a, b in edges:
        if a != b:
            succ.setdefault(a, set()).add(b)
            succ.setdefault(b, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = [0]

    def visit(start: str) -> None:
        # Iterative, so that a long chain of imports cannot exhaust Python's recursion limit.
        work = [(start, iter(sorted(succ[start])))]
        index[start] = low[start] = counter[0]; counter[0] += 1
        stack.append(start); on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter[0]; counter[0] += 1
                    stack.append(child); on_stack.add(child)
                    work.append((child, iter(sorted(succ[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop(); on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))

    for node in sorted(succ):
        if node not in index:
            visit(node)
    return sorted(found)


def problems(graph: Graph, layers: list[tuple[str, tuple[str, ...]]] = LAYERS,
             known: dict[frozenset[str], str] = KNOWN_CIRCLES, top: str = "adaln_bench") -> list[str]:
    """One line per problem: a module in no layer, an import up a layer, a circle of files or packages."""
    def shown(module: str) -> str:
        return f"{top}.{module}" if module else top

    found = []
    for module in sorted(graph.modules):
        if layer_of(module, layers) is None:
            found.append(f"{shown(module)}: in no layer (declare it in LAYERS)")
    for imp in graph.imports:
        low, high = layer_of(imp.source, layers), layer_of(imp.target, layers)
        if low is not None and high is not None and high > low:
            path = graph.modules[imp.source].relative_to(graph.modules[""].parent.parent)
            found.append(f"{path}:{imp.line}: imports {shown(imp.target)}, up from layer "
                         f"'{layers[low][0]}' to '{layers[high][0]}'")
    file_edges = [(i.source, i.target) for i in graph.imports]
    for circle in circles(file_edges):
        if frozenset(circle) not in known:
            found.append("circle of files: " + " <-> ".join(shown(m) for m in circle))
    left = set(map(frozenset, circles(file_edges)))
    for circle, why in known.items():
        if circle not in left:
            found.append("known circle gone (" + why + "), drop it from KNOWN_CIRCLES: "
                         + " <-> ".join(sorted(circle)))
    edges = [(package_of(i.source, graph), package_of(i.target, graph)) for i in graph.imports
             if frozenset({i.source, i.target}) not in known]
    for circle in circles(edges):
        found.append("circle of packages: " + " <-> ".join(circle))
    return found


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     epilog="The layers are declared in LAYERS, in this file.")
    parser.add_argument("--package", type=Path, default=ROOT / "adaln_bench",
                        help="the package's folder (default: this checkout's adaln_bench/)")
    parser.add_argument("--layers", action="store_true", help="print the layers, bottom first, and exit")
    args = parser.parse_args(argv)
    if args.layers:
        for index, (name, prefixes) in enumerate(LAYERS):
            print(f"{index}  {name}: " + ", ".join(p or "(the package's __init__)" for p in prefixes))
        return 0
    if not (args.package / "__init__.py").is_file():
        print(f"import_layers: {args.package} is not a package folder (no __init__.py)", file=sys.stderr)
        return 2
    graph = import_graph(args.package)
    found = problems(graph, top=args.package.name)
    for line in found:
        print(line)
    if found:
        return 1
    print(f"{len(graph.modules)} modules, {len(graph.imports)} first-party imports, {len(LAYERS)} layers: "
          "no circle, no import up a layer")
    return 0


if __name__ == "__main__":
    sys.exit(main())
