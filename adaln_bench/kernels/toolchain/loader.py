"""Each library opened once a process: the first call builds it or takes it from the cache, later calls reuse it."""
from __future__ import annotations

import threading
from pathlib import Path
from typing import Callable, TypeVar

from adaln_bench.kernels.toolchain.cache import ensure_library
from adaln_bench.kernels.toolchain.compile import Log
from adaln_bench.kernels.toolchain.recipe import Recipe

L = TypeVar("L")
_OPENED: dict[Recipe, object] = {}
# Two threads (autograd's device thread and the caller) may ask at once: one of them builds and opens it.
_LOCK = threading.Lock()


def load_once(recipe: Recipe, open_library: Callable[[Path, dict], L], log: Log = None) -> L:
    """open_library(path, build record) of this recipe's library, called once a process."""
    with _LOCK:
        if recipe not in _OPENED:
            path, meta = ensure_library(recipe, log=log)
            _OPENED[recipe] = open_library(path, meta)
        return _OPENED[recipe]  # type: ignore[return-value]
