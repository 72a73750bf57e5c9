"""Compiling a recipe into a folder: nvcc and the headers found, the sources compiled in parallel, one library.

A library of one source is compiled and linked by one nvcc call; one of several sources has each compiled to an
object (in parallel: nvcc is single-threaded, and the CUTLASS sources take a minute or more each) and then linked.
The folder gets the library and meta.json, the build record: flags, nvcc's version, the headers used, seconds.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable, Optional

from adaln_bench.kernels.toolchain.arch import gencode
from adaln_bench.kernels.toolchain.errors import BuildError
from adaln_bench.kernels.toolchain.nvcc import find_nvcc, nvcc_missing, nvcc_version
from adaln_bench.kernels.toolchain.recipe import Recipe, cache_key

Log = Optional[Callable[[str], None]]


def missing(recipe: Recipe) -> Optional[str]:
    """None when this machine can build the recipe, else what is missing, in one line."""
    problem = nvcc_missing()
    if problem:
        return problem
    nvcc = find_nvcc()
    for headers in recipe.header_sets:
        if headers.find(nvcc) is None:
            return headers.missing
    return None


def _run(cmd: list[str], what: str) -> float:
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise BuildError(f"{what} failed (exit {proc.returncode}): {' '.join(cmd)}\n"
                         f"{(proc.stdout + proc.stderr)[-6000:]}")
    return time.perf_counter() - t0


def _include_flags(recipe: Recipe, nvcc: str, staging: Path) -> tuple[list[str], dict]:
    """-I flags for the recipe's folder and its header sets (staged ones copied into `staging`); their record."""
    flags, record = [f"-I{recipe.folder}"], {}
    for headers in recipe.header_sets:
        folder = headers.find(nvcc)
        if folder is None:
            raise BuildError(headers.missing)
        record[f"{headers.name}_include"] = str(folder)
        version = headers.version()
        if version:
            record[f"{headers.name}_version"] = version
        if headers.staged:
            own = staging / headers.name
            own.mkdir()
            for f in headers.files(folder):
                shutil.copy2(f, own / f.name)
            folder = own
        flags.append(f"-I{folder}")
    return flags, record


def _compile(recipe: Recipe, nvcc: str, flags: list[str], out_dir: Path, jobs: Optional[int], log: Log) -> dict:
    """Seconds per source; the library written to out_dir/recipe.lib_name."""
    lib = out_dir / recipe.lib_name
    if len(recipe.sources) == 1:
        src = recipe.sources[0]
        return {src: _run([nvcc, *flags, "-shared", str(recipe.folder / src), "-o", str(lib)],
                          f"nvcc {src} for {recipe.arch}")}

    def one(src: str) -> tuple[str, float]:
        obj = out_dir / (Path(src).stem + ".o")
        secs = _run([nvcc, *flags, "-c", str(recipe.folder / src), "-o", str(obj)], f"nvcc {src} for {recipe.arch}")
        if log:
            log(f"  compiled {src} for {recipe.arch} in {secs:.1f} s")
        return src, secs

    with ThreadPoolExecutor(max_workers=jobs or max(1, min(len(recipe.sources), os.cpu_count() or 1))) as pool:
        seconds = dict(pool.map(one, recipe.sources))
    objs = [out_dir / (Path(s).stem + ".o") for s in recipe.sources]
    _run([nvcc, "-shared", gencode(recipe.arch), "-o", str(lib), *map(str, objs)],
         f"link {recipe.lib_name} for {recipe.arch}")
    for o in objs:
        o.unlink()
    return seconds


def compile_library(recipe: Recipe, out_dir: Path, jobs: Optional[int] = None, log: Log = None) -> dict:
    """Build the recipe's library into out_dir (created if need be); returns the build record, also meta.json."""
    problem = missing(recipe)
    if problem:
        raise BuildError(problem)
    nvcc = find_nvcc()
    out_dir.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="adaln-headers-") as staging:
        includes, record = _include_flags(recipe, nvcc, Path(staging))
        seconds = _compile(recipe, nvcc, [*recipe.nvcc_flags(), *includes], out_dir, jobs, log)
    meta = {"name": recipe.name, "abi": recipe.abi, "arch": recipe.arch, **dict(recipe.notes),
            "key": cache_key(recipe), "flags": " ".join(recipe.nvcc_flags()), "nvcc": nvcc_version(nvcc),
            "nvcc_path": nvcc, **record, "compile_seconds": {k: round(v, 1) for k, v in seconds.items()},
            "build_seconds": round(time.perf_counter() - t0, 1)}
    (out_dir / "meta.json").write_text(json.dumps(meta, indent=2))
    return meta
