"""Per-mode environments and input fingerprints, as a reader of a report sees them. Pure: no I/O.

A mode may run under another interpreter than the parent's (`--python`). These functions say where a
mode's environment differs from the parent's (the top-level `environment`), and which modes drew other
seeded inputs than the parent's modes: those modes' numbers do not compare bit for bit with the rest.
"""
from __future__ import annotations

from collections import Counter
from typing import Mapping, Optional

from adaln_bench.datamodel.schema import Environment, InputFingerprint, ModeEnvironment, ModeRun, Report

# The fields of a mode's environment, in the order they are shown.
ENVIRONMENT_FIELDS = ("interpreter", "python", "torch", "cuda", "framework_version")


def _inputs_key(inputs: InputFingerprint) -> tuple:
    return (inputs.seed, inputs.rows, tuple(sorted(inputs.tensor_hashes().items())), inputs.upstream_sha256,
            inputs.permutation_sha256)


def modes_with_other_inputs(runs: Mapping[str, ModeRun], parent_interpreter: Optional[str]) -> Optional[list[str]]:
    """Modes whose input fingerprint differs from the reference one; None when no mode recorded any.

    The reference is the most common fingerprint among the modes run under the parent's interpreter
    (all modes, when none was), so that the report is judged against the environment it is named after.
    """
    fingerprints = {name: _inputs_key(run.inputs) for name, run in runs.items() if run.inputs is not None}
    if not fingerprints:
        return None
    own = [key for name, key in fingerprints.items()
           if parent_interpreter is None or _interpreter(runs[name]) in (None, parent_interpreter)]
    reference = Counter(own or fingerprints.values()).most_common(1)[0][0]
    return [name for name, key in fingerprints.items() if key != reference]


def _interpreter(run: ModeRun) -> Optional[str]:
    return run.environment.interpreter if run.environment else None


def parent_value(env: Environment, mode_env: ModeEnvironment, name: str) -> Optional[str]:
    """The parent's value of one field of a mode's environment."""
    if name == "framework_version":
        return env.libraries.get(mode_env.framework) if mode_env.framework else None
    return getattr(env, name)


def environment_differences(report: Report) -> dict[str, list[tuple[str, Optional[str], str]]]:
    """Per mode, (field, parent's value, mode's value) where the mode's environment differs from the parent's.

    A field the mode did not record (a child that never started records only its interpreter) is skipped.
    """
    out: dict[str, list[tuple[str, Optional[str], str]]] = {}
    for name, run in (report.modes or {}).items():
        if run.environment is None:
            continue
        fields = []
        for field in ENVIRONMENT_FIELDS:
            mine = getattr(run.environment, field)
            theirs = parent_value(report.environment, run.environment, field)
            if mine is not None and mine != theirs:
                fields.append((field, theirs, mine))
        if fields:
            out[name] = fields
    return out


def _label(field: str, env: ModeEnvironment) -> str:
    return (env.framework or "framework") if field == "framework_version" else field


def environment_lines(report: Report) -> list[str]:
    """One line per mode whose environment differs from the parent's."""
    lines = []
    for name, fields in environment_differences(report).items():
        env = report.modes[name].environment
        parts = [f"{_label(f, env)} {mine} (parent: {theirs or '—'})" for f, theirs, mine in fields]
        lines.append(f"mode {name} environment: " + "; ".join(parts))
    return lines


def input_warning(report: Report) -> Optional[str]:
    """A warning naming the modes whose seeded inputs differ, or None."""
    runs = report.modes or {}
    differ = modes_with_other_inputs(runs, report.environment.interpreter)
    if not differ:
        return None
    return ("WARNING: seeded inputs differ from the parent environment's in mode(s) " + ", ".join(differ)
            + ": their outputs, fingerprints and consistency letters compare different numbers")
