"""A candidate the user names as `module:function`: function(temb, w, b) -> (T, N) table, autograd-aware."""
from __future__ import annotations

import importlib
import importlib.util
import re
from typing import Optional

from adaln_bench.errors import UserError
from adaln_bench.kernels.registry import BuildContext, Candidate, Implementation

_SPEC = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")


def _resolve(spec: str):
    module_name, attr = spec.split(":", 1)
    obj = importlib.import_module(module_name)
    for part in attr.split("."):
        obj = getattr(obj, part)
    if not callable(obj):
        raise TypeError(f"{spec} is not callable")
    return obj


def candidate_from_spec(spec: str) -> Candidate:
    if not _SPEC.match(spec):
        raise UserError(f"candidate {spec!r}: expected a registered name or module:function")
    module_name = spec.split(":", 1)[0]

    def availability() -> Optional[str]:
        try:
            _resolve(spec)
        except Exception as exc:  # the user's code: any failure makes it unavailable, with the reason
            return f"{type(exc).__name__}: {exc}"
        return None

    def build(ctx: BuildContext) -> Implementation:
        fn = _resolve(spec)
        return Implementation(source=f"user function {spec}", has_backward=True, forward=fn,
                              details={"path": spec})

    try:
        top_found = importlib.util.find_spec(module_name.split(".")[0]) is not None
    except (ImportError, ValueError):
        top_found = False
    if not top_found:
        raise UserError(f"candidate {spec!r}: module {module_name!r} is not importable")
    return Candidate(name=spec, description=f"user function {spec}", default_modes=None,
                     availability=availability, build=build)
