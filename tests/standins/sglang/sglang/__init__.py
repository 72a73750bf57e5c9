"""Stand-in for SGLang 0.5.23: only sglang.srt.batch_invariant_ops."""
