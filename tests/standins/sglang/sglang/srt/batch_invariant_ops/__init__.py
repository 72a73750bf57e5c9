"""Stand-in for sglang.srt.batch_invariant_ops: the package re-exports the switch, as SGLang's does."""
from .batch_invariant_ops import (
    disable_batch_invariant_mode,
    enable_batch_invariant_mode,
    is_batch_invariant_mode_enabled,
)

__all__ = ["disable_batch_invariant_mode", "enable_batch_invariant_mode", "is_batch_invariant_mode_enabled"]
