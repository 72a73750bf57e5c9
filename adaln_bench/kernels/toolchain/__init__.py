"""One toolchain for the bundled CUDA libraries: each library declares a Recipe (its sources, flags, defines,
headers), and these modules do the rest the same way for all of them.

arch      compute capability -> nvcc target -> -gencode
nvcc      which nvcc, in one documented order, and its version
headers   CUTLASS's and curand's headers, found and handed to nvcc
recipe    what a library declares for one target, and the cache key that follows from it
compile   nvcc over a recipe's sources (in parallel) into one shared library and its build record
cache     where libraries are kept; a cached one reused, a new one built atomically
loader    each library opened once a process
c_calls   the C interfaces' convention: a status, and a message in a buffer the caller passes
cli       the prebuild command of every library module

Imports nothing outside the standard library (the draws load it without torch).
"""
from adaln_bench.kernels.toolchain.arch import arch_for_capability, gencode, parse_arch
from adaln_bench.kernels.toolchain.cache import (build_atomically, cache_root, cached_meta, ensure_library,
                                                 library_dir, unavailable)
from adaln_bench.kernels.toolchain.cli import prebuild_main
from adaln_bench.kernels.toolchain.compile import compile_library, missing
from adaln_bench.kernels.toolchain.errors import BuildError
from adaln_bench.kernels.toolchain.headers import CURAND, CUTLASS, HeaderSet
from adaln_bench.kernels.toolchain.loader import load_once
from adaln_bench.kernels.toolchain.nvcc import find_nvcc, nvcc_version
from adaln_bench.kernels.toolchain.recipe import Recipe, cache_key

__all__ = ["BuildError", "CURAND", "CUTLASS", "HeaderSet", "Recipe", "arch_for_capability", "build_atomically",
           "cache_key", "cache_root", "cached_meta", "compile_library", "ensure_library", "find_nvcc", "gencode",
           "library_dir", "load_once", "missing", "nvcc_version", "parse_arch", "prebuild_main", "unavailable"]
