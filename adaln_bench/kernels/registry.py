"""The candidate registry's old home: plugins written before operators existed import from here.

Everything lives in adaln_bench/ops/candidates.py now; a candidate that names no operator is the
projection's (adaln_projection).
"""
from adaln_bench.ops.candidates import (  # noqa: F401  (re-exported)
    DEFAULT_OP, BuildContext, Candidate, Implementation, candidates_of, get, register)


def all_candidates() -> dict[str, Candidate]:
    """The projection's candidates, as this function returned before there were other operators."""
    return candidates_of(DEFAULT_OP)
