"""The candidate registry as plugins written before operators existed import it, as `adaln_bench.kernels.registry`
(an alias of this module: adaln_bench/moved_modules.py). Deprecated: import from adaln_bench.ops.candidates.
By the one compatibility rule (adaln_bench/ops/compat.py), a candidate that names no operator is the projection's.
"""
from adaln_bench.ops.candidates import (  # noqa: F401  (re-exported)
    DEFAULT_OP, BuildContext, Candidate, Implementation, candidates_of, get, register)
from adaln_bench.ops.compat import LEGACY_OPERATOR

DEPRECATION = "adaln_bench.kernels.registry is deprecated: import from adaln_bench.ops.candidates"


def all_candidates() -> dict[str, Candidate]:
    """The projection's candidates, as this function returned before there were other operators."""
    return candidates_of(LEGACY_OPERATOR)
