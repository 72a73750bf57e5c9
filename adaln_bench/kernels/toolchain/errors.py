"""The one error a kernel library's build or load raises."""
from __future__ import annotations


class BuildError(RuntimeError):
    """A kernel library could not be built or loaded (a missing compiler or header, a failed nvcc, a GPU the
    library does not support, a library of another interface version)."""
