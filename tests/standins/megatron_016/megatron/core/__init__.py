"""Stand-in for megatron-core 0.16.1 (megatron/ is a namespace package, as in the wheel)."""
from megatron.core.package_info import __version__
