"""adaln-bench: is the AdaLN projection batch-invariant, how accurate, how fast, under each framework's mode."""
from adaln_bench import moved_modules

__version__ = "0.1.0"

moved_modules.install()  # old module paths keep importing (adaln_bench/moved_modules.py)
