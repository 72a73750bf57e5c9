"""adaln-bench: is the AdaLN projection batch-invariant, how accurate, how fast, under each framework's mode."""

__version__ = "0.1.0"
