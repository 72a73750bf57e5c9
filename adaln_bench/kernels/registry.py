"""The candidate registry's old home, deprecated: plugins written before operators existed import from here.

Everything lives in adaln_bench/ops/candidates.py now; import from there. By the one compatibility rule
(adaln_bench/ops/compat.py), a candidate that names no operator is the projection's.
"""
import warnings

from adaln_bench.ops.candidates import (  # noqa: F401  (re-exported)
    DEFAULT_OP, BuildContext, Candidate, Implementation, candidates_of, get, register)
from adaln_bench.ops.compat import LEGACY_OPERATOR

warnings.warn("adaln_bench.kernels.registry is deprecated: import from adaln_bench.ops.candidates",
              DeprecationWarning, stacklevel=2)


def all_candidates() -> dict[str, Candidate]:
    """The projection's candidates, as this function returned before there were other operators."""
    return candidates_of(LEGACY_OPERATOR)
