"""How much a metric may move before `diff` calls it a change: defaults, a TOML file, the command line.

Precedence: the defaults below, then the file given with `--thresholds`, then the command-line options.
Batch invariance has no threshold: one differing row is a regression.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Optional

from adaln_bench.errors import UserError
from adaln_bench.toml_file import read_toml


@dataclass(frozen=True)
class Thresholds:
    # Relative change of a median latency beyond which it may count (and only if the quartiles also part).
    latency: float = 0.05
    # Relative change of an error against FP64 beyond which it counts.
    accuracy: float = 0.10
    # Absolute change of an error below which it never counts: errors near zero (the bias gradient at
    # T = 1 is exactly 0.0) would otherwise turn a change in the eighth digit into an infinite ratio.
    # 1e-5 is far below the bf16 output's own rounding (2**-8 ≈ 3.9e-3) and above fp32 accumulation noise.
    accuracy_floor: float = 1e-5
    # Significance a device-time change needs besides the threshold (Mann-Whitney U, datamodel/stats.py):
    # asv's 0.002, so that one run of false alarms in a nightly is rare across its ~60 latency rows.
    latency_alpha: float = 0.002


# The keys a thresholds file may hold, and the field each sets.
FILE_KEYS = {
    "latency_threshold": "latency",
    "accuracy_threshold": "accuracy",
    "accuracy_floor": "accuracy_floor",
    "latency_alpha": "latency_alpha",
}


def _check_value(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise UserError(f"{name} must be a number, not {value!r}")
    number = float(value)
    if not math.isfinite(number) or number < 0:
        raise UserError(f"{name} must be a finite number ≥ 0, not {value!r}")
    return number


def load_thresholds_file(path: str | Path) -> dict[str, float]:
    """Read a TOML file of `latency_threshold`, `accuracy_threshold`, `accuracy_floor` (all optional)."""
    p = Path(path)
    data = read_toml(p, kind="thresholds file")
    unknown = sorted(set(data) - set(FILE_KEYS))
    if unknown:
        raise UserError(
            f"{p}: unknown key {unknown[0]!r}; a thresholds file may set {', '.join(FILE_KEYS)}"
        )
    return {FILE_KEYS[key]: _check_value(f"{p}: {key}", value) for key, value in data.items()}


def resolve_thresholds(
    file: Optional[str | Path] = None,
    latency: Optional[float] = None,
    accuracy: Optional[float] = None,
    accuracy_floor: Optional[float] = None,
    latency_alpha: Optional[float] = None,
) -> Thresholds:
    """Defaults, overridden by the file, overridden by the options that were given."""
    result = Thresholds()
    if file is not None:
        result = replace(result, **load_thresholds_file(file))
    given = {"latency": latency, "accuracy": accuracy, "accuracy_floor": accuracy_floor,
             "latency_alpha": latency_alpha}
    option_names = {"latency": "--latency-threshold", "accuracy": "--accuracy-threshold",
                    "accuracy_floor": "--accuracy-floor", "latency_alpha": "--latency-alpha"}
    overrides = {k: _check_value(option_names[k], v) for k, v in given.items() if v is not None}
    result = replace(result, **overrides)
    if not 0 < result.latency_alpha < 1:
        raise UserError(f"latency_alpha must be between 0 and 1, not {result.latency_alpha!r}")
    return result


def thresholds_as_dict(thresholds: Thresholds) -> dict[str, float]:
    return {f.name: getattr(thresholds, f.name) for f in fields(thresholds)}
