"""The one compatibility rule: a form that names no operator means adaln_projection.

The harness measured the projection alone before it measured the model's other operators, and users' habits
from then name no operator. Each of them still means the projection, through this module and nowhere else:

- `run --out X.json` without `--op` (one report file: the projection's);
- `run --dim/--hidden/--modalities` and `run --preset flux` (sizes only the projection takes);
- `run --candidate module:function` without `--op`, and a candidate (entry point of `adaln_bench.candidates`,
  `Candidate(...)`, `BuildContext(...)`, `get(name)`) that names no operator;
- the import path `adaln_bench.kernels.registry` (deprecated: import from adaln_bench.ops.candidates), an alias of
  ops/legacy_registry.py (adaln_bench/moved_modules.py);
- the nightly workflow's `baseline` input naming one report file (a `REV:dir` names every operator's).

Deprecated, because the form is odd today: `--out X.json` without `--op` (pass `--op adaln_projection`) and
the `adaln_bench.kernels.registry` import path (it warns). Both keep working. `run` finds the first form
given with `legacy_form`, and harness/assembly/selection.py applies this rule; a new form of this kind belongs here.
"""
from __future__ import annotations

from pathlib import Path
from typing import Optional, Sequence

from adaln_bench.errors import UserError

LEGACY_OPERATOR = "adaln_projection"


def legacy_form(preset: Optional[str], dim: Optional[int], hidden: Optional[int], modalities: Optional[int],
                out: Optional[Path], ops_named: Sequence[str]) -> Optional[str]:
    """The first option of `run` given that means the projection, as the user wrote it: a size only the
    projection has, `--preset flux`, or `--out X.json` without `--op`; None when there is none."""
    for name, value in (("--dim", dim), ("--hidden", hidden), ("--modalities", modalities)):
        if value is not None:
            return name
    if preset == "flux":
        return "--preset flux"
    if out is not None and out.suffix == ".json" and not ops_named:
        return f"--out {out}"
    return None


def check_fits(form: Optional[str], chosen: Sequence[str]) -> None:
    """A form that means the projection (`form`: the option as the user wrote it) given together with `--op`:
    only the projection may be chosen."""
    if form and any(name != LEGACY_OPERATOR for name in chosen):
        raise UserError(f"{form} is an option of {LEGACY_OPERATOR} only; drop it or run --op {LEGACY_OPERATOR}")


def names_no_operator(candidate_names: Sequence[str]) -> bool:
    """Candidates given without `--op` that are all `module:function`: they name no operator."""
    return bool(candidate_names) and all(":" in c for c in candidate_names)
