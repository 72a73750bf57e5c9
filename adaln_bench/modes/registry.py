"""The mode registry: each framework's batch-invariant mode, and recipes that need no framework.

A mode is applied in two steps, both in its own child process: its environment variables are set
before torch is imported (cuBLAS reads them once per process), then `enable` runs after the import
and returns a `Switch` that says what it used and how to switch it off for the FP64 reference.
"""
from __future__ import annotations

from typing import Optional

from adaln_bench.errors import UserError
# The types are defined in mode_types.py; the modes and their users import them from here too.
from adaln_bench.modes.mode_types import (  # noqa: F401
    ModeKind, ModeOptions, Switch, TorchSettings, Mode, env_problem)
from adaln_bench.modes.recipe_file import load_recipe_file
from adaln_bench.named_registry import NamedRegistry

_REGISTRY: NamedRegistry[Mode] = NamedRegistry("mode", (
    "adaln_bench.modes.plain",
    "adaln_bench.modes.vllm",
    "adaln_bench.modes.sglang",
    "adaln_bench.modes.megatron",
    "adaln_bench.modes.recipes",
))
register = _REGISTRY.register


def all_modes(extra_file: Optional[str] = None) -> dict[str, Mode]:
    """Every registered mode in registry order, plus the recipes of a user's TOML file."""
    modes = _REGISTRY.load()
    if extra_file:
        for mode in load_recipe_file(extra_file):
            if mode.name in modes:
                raise UserError(f"{extra_file}: mode {mode.name!r} already exists")
            modes[mode.name] = mode
    return modes
