"""The candidate registry: every implementation of an operator the harness can measure.

A candidate is registered once for its operator, with a cheap availability check and a builder. The harness
only ever sees `Implementation.forward(*inputs)`, the inputs in the operator's declared order (or the
candidate's own subset, `inputs`), returning the output tensor or a tuple of outputs; it differentiates
through it with autograd, so a candidate with a custom backward wraps it in a `torch.autograd.Function`.
A child process builds a candidate from its name alone: a registered name, an entry point of the
`adaln_bench.candidates` group, or `module:function`.
"""
from __future__ import annotations

from typing import Optional

from adaln_bench.named_registry import NamedRegistry
# The types are defined in candidate_types.py; operators and plugins import them from here too.
from adaln_bench.ops.candidate_types import (  # noqa: F401
    DEFAULT_OP, BuildContext, Candidate, ForwardFn, Implementation)
from adaln_bench.ops.user_function import candidate_from_spec


# Built-in candidates register themselves when their operator's module is imported (adaln_bench/ops/<op>/).
_REGISTRY: NamedRegistry[Candidate] = NamedRegistry("candidate", ())


def register(candidate: Candidate) -> Candidate:
    key = f"{candidate.op}/{candidate.name}"
    if key in _REGISTRY.entries:
        raise ValueError(f"candidate {candidate.name!r} of {candidate.op} is registered twice")
    _REGISTRY.entries[key] = candidate
    return candidate


def candidates_of(op: str) -> dict[str, Candidate]:
    """Every candidate of operator `op`, by name, in registration order (entry points last)."""
    from adaln_bench.ops.registry import load_operators

    load_operators()
    _load_entry_points()
    return {c.name: c for c in _REGISTRY.entries.values() if c.op == op}


_ENTRY_POINTS_LOADED = False


def _load_entry_points() -> None:
    """Candidates other packages declare under the `adaln_bench.candidates` entry-point group: read once per
    process (a scan of every installed distribution's metadata is ~20 ms, and a run looks candidates up hundreds
    of times)."""
    global _ENTRY_POINTS_LOADED
    if _ENTRY_POINTS_LOADED:
        return
    from importlib.metadata import entry_points

    for ep in entry_points(group="adaln_bench.candidates"):
        if any(key.split("/", 1)[1] == ep.name for key in _REGISTRY.entries):
            continue
        obj = ep.load()
        candidate = obj() if callable(obj) and not isinstance(obj, Candidate) else obj
        if not isinstance(candidate, Candidate):
            raise TypeError(f"entry point {ep.name!r} gave {type(candidate).__name__}, not a Candidate")
        _REGISTRY.entries.setdefault(f"{candidate.op}/{candidate.name}", candidate)
    _ENTRY_POINTS_LOADED = True  # not before: a bad entry point keeps raising, as it always did


def get(name: str, op: str = DEFAULT_OP) -> Candidate:
    """A registered candidate of `op` by name, or a user's `module:function` candidate (for `op`)."""
    table = candidates_of(op)
    if name in table:
        return table[name]
    if ":" in name:
        return candidate_from_spec(name, op)
    raise KeyError(name)


def other_operator_of(name: str, op: str) -> Optional[str]:
    """The operator a registered candidate `name` belongs to when it is not `op` (a plugin for another one)."""
    candidates_of(op)
    owners = [c.op for c in _REGISTRY.entries.values() if c.name == name and c.op != op]
    return owners[0] if owners else None
