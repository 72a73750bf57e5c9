"""A candidate the user names as `module:function`: function(*inputs) -> output(s), autograd-aware.

The function takes the operator's inputs in their declared order (`adaln-bench ops` lists them; the
projection's: temb, w, b). The parent imports the module when the run starts (`check_importable`), so a missing module or function is
one line and exit 2 before anything is measured.
"""
from __future__ import annotations

import importlib
import importlib.util
import re

from adaln_bench.errors import UserError
from adaln_bench.ops.candidate_types import BuildContext, Candidate, Implementation
from adaln_bench.ops.compat import LEGACY_OPERATOR

_SPEC = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")
PATH_HINT = "(is its folder on PYTHONPATH? e.g. PYTHONPATH=. adaln-bench run …)"


def _resolve(spec: str):
    module_name, attr = spec.split(":", 1)
    obj = importlib.import_module(module_name)
    for part in attr.split("."):
        obj = getattr(obj, part)
    if not callable(obj):
        raise TypeError(f"{spec} is not callable")
    return obj


def check_importable(spec: str) -> None:
    """In the parent, before anything runs: the module imports and the function exists, else one line."""
    if not _SPEC.match(spec):
        raise UserError(f"candidate {spec!r}: expected a registered name or module:function")
    module_name = spec.split(":", 1)[0]
    try:
        top_found = importlib.util.find_spec(module_name.split(".")[0]) is not None
    except (ImportError, ValueError):
        top_found = False
    if not top_found:
        raise UserError(f"candidate {spec!r}: module {module_name!r} is not importable {PATH_HINT}")
    try:
        _resolve(spec)
    except Exception as exc:  # the user's code: any failure to import it or find the function is their mistake
        raise UserError(f"candidate {spec!r}: {type(exc).__name__}: {exc}") from None


def candidate_from_spec(spec: str, op: str = LEGACY_OPERATOR) -> Candidate:
    """The candidate; in a child (another interpreter, say) a function that does not import is unavailable."""
    if not _SPEC.match(spec):
        raise UserError(f"candidate {spec!r}: expected a registered name or module:function")

    def availability():
        try:
            _resolve(spec)
        except Exception as exc:  # the user's code: any failure makes it unavailable, with the reason
            return f"{type(exc).__name__}: {exc}"
        return None

    def build(ctx: BuildContext) -> Implementation:
        return Implementation(source=f"user function {spec}", has_backward=True, forward=_resolve(spec),
                              details={"path": spec})

    return Candidate(name=spec, description=f"user function {spec}", default_modes=None,
                     availability=availability, build=build, op=op)
