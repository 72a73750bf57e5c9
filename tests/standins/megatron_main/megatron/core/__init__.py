"""Stand-in for megatron-core 0.18.0rc0 (megatron/ is a namespace package, as in the wheel)."""
from megatron.core.package_info import __version__
