"""What a run measures: its operators, each one's candidates per mode, and the children's jobs.

Everything here is decided in the parent before a child starts, so that a mistake (an unknown operator, a
candidate of another operator, a size an operator does not take) is one line and exit 2.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Optional, Sequence

from adaln_bench.errors import UserError
from adaln_bench.harness.processes.protocol import OpWork
from adaln_bench.harness.processes.runner import ModeJob
from adaln_bench.modes.registry import Mode
from adaln_bench.ops import candidates as registry
from adaln_bench.ops import compat
from adaln_bench.ops.registry import all_operators, get_operator
from adaln_bench.ops.spec import Operator
from adaln_bench.shape import Shape


def choose_operators(names: Sequence[str], projection_only: Optional[str], candidate_names: Sequence[str]
                     ) -> list[Operator]:
    """`--op` names (or `all`); without them every operator, or the operators that have every named candidate.
    A form that names no operator (`projection_only`: its sizes, the flux preset, an `--out` that names one
    report file; or only module:function candidates) means the projection (adaln_bench/ops/compat.py)."""
    known = all_operators()
    if names:
        if "all" in names:
            return list(known.values())
        chosen = [get_operator(n) for n in dict.fromkeys(names)]
        compat.check_fits(projection_only, [op.name for op in chosen])
        return chosen
    if projection_only or compat.names_no_operator(candidate_names):
        return [get_operator(compat.LEGACY_OPERATOR)]
    if candidate_names:
        having = [op for op in known.values()
                  if all(":" in c or c in registry.candidates_of(op.name) for c in candidate_names)]
        everywhere = {c for op in known.values() for c in registry.candidates_of(op.name)}
        unknown = [c for c in candidate_names if ":" not in c and c not in everywhere]
        if unknown:
            raise UserError(f"unknown candidate {unknown[0]!r}; known: {', '.join(sorted(everywhere))}, or "
                            "module:function")
        if not having:
            raise UserError(f"no operator has every candidate of {', '.join(candidate_names)}; "
                            "name one with --op (adaln-bench ops lists them)")
        return having
    return list(known.values())


def check_candidates(ops: Sequence[Operator], names: Sequence[str]) -> None:
    """Each named candidate exists for each chosen operator; a plugin for another operator is refused."""
    from adaln_bench.ops.user_function import check_importable

    for name in dict.fromkeys(names):
        if ":" in name:
            check_importable(name)
            continue
        for op in ops:
            if name in registry.candidates_of(op.name):
                continue
            owner = registry.other_operator_of(name, op.name)
            if owner is not None:
                raise UserError(f"candidate {name!r} is a candidate of {owner}, not of {op.name}")
            known = ", ".join(registry.candidates_of(op.name))
            raise UserError(f"unknown candidate {name!r} for {op.name}; known: {known}, or module:function")


@dataclass(frozen=True)
class Selection:
    """Per operator, per mode: the candidates to measure (names as registered)."""

    ops: list[Operator]
    per_op: dict[str, dict[str, list[str]]]

    def report_names(self, op: str, mode: str) -> list[str]:
        return [registry.get(c, op).report_name(mode) for c in self.per_op[op].get(mode, [])]


def select(ops: Sequence[Operator], modes: Sequence[Mode], names: Sequence[str]) -> Selection:
    """Candidates per operator and mode: those named (in every mode the operator runs under), else each
    candidate's default modes."""
    per_op: dict[str, dict[str, list[str]]] = {}
    for op in ops:
        table = registry.candidates_of(op.name)
        per_mode = {}
        for m in modes:
            if names:
                per_mode[m.name] = list(dict.fromkeys(names))
            else:
                per_mode[m.name] = [c.name for c in table.values()
                                    if c.default_modes is None or m.name in c.default_modes]
        per_op[op.name] = per_mode
    return Selection(list(ops), per_op)


def jobs(selection: Selection, modes: Sequence[Mode], interpreters: dict[str, str], parts: int = 1,
         shape: Optional[Shape] = None) -> list[ModeJob]:
    """One child per mode measuring every operator that runs under it; with `parts` > 1 (several CPU cores),
    that many children per mode share its operators, heaviest first, each measuring those it claims
    (harness/processes/claims.py)."""
    out = []
    for m in modes:
        work = [OpWork(op=op.name, candidates=selection.per_op[op.name][m.name]) for op in selection.ops
                if op.runs_under(m.name) and selection.per_op[op.name][m.name]]
        if not work:
            continue
        if parts > 1 and len(work) > 1:
            shared = tuple(heaviest_first(work, shape))
            out.extend(ModeJob(m, shared, interpreters.get(m.name), part=i, shared=True)
                       for i in range(min(parts, len(work))))
        else:
            out.append(ModeJob(m, tuple(work), interpreters.get(m.name)))
    return out


def heaviest_first(work: list[OpWork], shape: Optional[Shape]) -> list[OpWork]:
    """By the declared bytes and FLOPs of the probes' rows (largest first), so that the parts that claim them
    in turn end together; in the given order without a shape."""
    if shape is None:
        return list(work)
    return sorted(work, key=lambda w: _probe_rows_cost(w.op, shape), reverse=True)


@lru_cache(maxsize=None)
def _probe_rows_cost(op_name: str, shape: Shape) -> float:
    from adaln_bench.harness.assembly.cpu_estimate import plan_work

    op = get_operator(op_name)
    one, many = op.cost(shape, 1), op.cost(shape, 65)
    per_row = (many.step_bytes + many.step_flops - one.step_bytes - one.step_flops) / 64
    return plan_work(op.family.full).rows * per_row
