"""Stand-in for vLLM 0.11.0, which has no batch-invariant module."""
__version__ = "0.11.0"
