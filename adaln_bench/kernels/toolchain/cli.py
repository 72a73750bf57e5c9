"""The prebuild command every library module runs as ``python -m <module> --arch sm_90a --arch sm_100a``."""
from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path
from typing import Callable, Optional

from adaln_bench.kernels.toolchain.cache import ensure_library, library_dir
from adaln_bench.kernels.toolchain.compile import compile_library
from adaln_bench.kernels.toolchain.errors import BuildError
from adaln_bench.kernels.toolchain.recipe import Recipe

# (arch, the parsed options) -> the recipe to build; --define is appended to its defines
RecipeFor = Callable[[str, argparse.Namespace], Recipe]


def prebuild_main(what: str, recipe_for: RecipeFor, argv: Optional[list[str]] = None,
                  add_options: Optional[Callable[[argparse.ArgumentParser], None]] = None) -> int:
    """Build `what` for each --arch into the cache (or under --out); one line a library, or one error line."""
    p = argparse.ArgumentParser(description=f"Prebuild {what} into the kernel cache (or under --out).")
    p.add_argument("--arch", action="append", default=None, help="sm_90a (default), sm_100a, ... (repeatable)")
    p.add_argument("--define", action="append", default=[],
                   help="an experiment variant, NAME=VALUE (repeatable; part of the cache key)")
    p.add_argument("--out", type=Path, default=None, help="build under this folder instead of the cache")
    if add_options:
        add_options(p)
    args = p.parse_args(argv)
    for arch in args.arch or ["sm_90a"]:
        try:
            recipe = recipe_for(arch, args)
            recipe = replace(recipe, defines=(*recipe.defines, *args.define))
            if args.out is not None:
                folder = args.out / library_dir(recipe).name
                compile_library(recipe, folder, log=print)
                lib, how = folder / recipe.lib_name, "built"
            else:
                lib, meta = ensure_library(recipe, log=print)
                how = "cached" if meta.get("prebuilt_or_cached") else "built"
        except ValueError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        except BuildError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        print(f"{recipe.name} {arch} {' '.join(recipe.defines)}: {lib} ({how})")
    return 0
