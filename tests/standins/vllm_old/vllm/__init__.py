"""Stand-in for vLLM 0.28.0: only the batch-invariant module, at the path that release has."""
__version__ = "0.28.0"
