"""The architecture rule every kernel library follows: compute capability -> nvcc target -> -gencode flag.

Architecture-specific code from Hopper on (9.0 -> sm_90a, 10.0 -> sm_100a: wgmma and the like need the 'a'
target, and a library built for it runs only on that capability), the exact target before (8.0 -> sm_80).
Each library names the lowest capability its instructions need; the rule itself is the same for all.
"""
from __future__ import annotations

from adaln_bench.kernels.toolchain.errors import BuildError


def parse_arch(arch: str) -> int:
    """The compute capability (10 * major + minor) an nvcc target like "sm_90a" names; ValueError otherwise."""
    digits = arch[3:].rstrip("af") if arch.startswith("sm_") else ""
    if not digits.isdigit():
        raise ValueError(f"arch must look like sm_90a, got {arch!r}")
    return int(digits)


def arch_for_capability(major: int, minor: int, min_cc: int = 0, needs: str = "") -> str:
    """The target a device of this capability needs; BuildError below `min_cc` (`needs` says why, if given)."""
    cc = 10 * major + minor
    if cc < min_cc:
        why = f": {needs}" if needs else ""
        raise BuildError(f"compute capability {major}.{minor} is not supported "
                         f"(needs {min_cc // 10}.{min_cc % 10} or later{why})")
    return f"sm_{cc}a" if cc >= 90 else f"sm_{cc}"


def gencode(arch: str) -> str:
    """Machine code for exactly this target, no PTX: a library never runs JIT-compiled on another GPU."""
    parse_arch(arch)
    return f"-gencode=arch=compute_{arch[3:]},code={arch}"
