"""What `adaln-bench ops` and `candidates` show: rows as data (for --json) and their tables."""
from __future__ import annotations

from typing import Sequence

from rich.markup import escape
from rich.table import Table

from adaln_bench.ops import candidates as registry
from adaln_bench.ops.registry import all_operators, get_operator
from adaln_bench.ops.sizes import dims_text


def ops_rows() -> list[dict]:
    rows = []
    for op in all_operators().values():
        plan = op.family.full
        rows.append({
            "op": op.name,
            "description": op.description,
            "tensors": [t.describe() for t in op.tensors],
            "outputs": [f"{o.name} {dims_text(o.dims)} {str(o.dtype).replace('torch.', '')}" for o in op.outputs],
            "grads": list(op.grads),
            "family": op.family.name,
            "sizes": [f"{op.family.size_symbol}={n}" for n in plan.accuracy_sizes],
            "probes": {"all_rows": list(plan.all_rows_sizes), "full_batch": plan.full_batch,
                       "sub_batch_sizes": list(plan.sub_batch_sizes)},
            "modes": "every mode" if op.modes.default is None else list(op.modes.default),
            "modes_why": op.modes.why,
            "candidates": list(registry.candidates_of(op.name)),
            "stock": op.stock_what,
        })
    return rows


def ops_table(rows: list[dict]) -> Table:
    table = Table(title="operators (adaln-bench run --op NAME)")
    for col in ("operator", "tensors (role, shape, dtype, draw) → outputs", "sizes", "modes", "candidates"):
        table.add_column(col, overflow="fold")
    for r in rows:
        tensors = "\n".join(r["tensors"]) + "\n→ " + ", ".join(r["outputs"]) + f"\ngrads: {', '.join(r['grads']) or '—'}"
        modes = r["modes"] if isinstance(r["modes"], str) else ", ".join(r["modes"])
        table.add_row(escape(r["op"]), escape(tensors), escape(", ".join(r["sizes"])),
                      escape(f"{modes}: {r['modes_why']}"), escape(", ".join(r["candidates"])))
    return table


def candidate_rows(ops: Sequence[str] = ()) -> list[dict]:
    rows = []
    for name in (ops or list(all_operators())):
        op = get_operator(name)
        for c in registry.candidates_of(op.name).values():
            reason = c.availability()
            rows.append({"op": op.name, "candidate": c.name, "description": c.description,
                         "default_modes": "every mode" if c.default_modes is None else list(c.default_modes),
                         "available": reason is None, "reason": reason})
    return rows


def candidates_table(rows: list[dict]) -> Table:
    table = Table(title="candidates (also: any module:function)")
    for col in ("operator", "candidate", "default modes", "available", "description / reason"):
        table.add_column(col, overflow="fold")
    for r in rows:
        modes = r["default_modes"] if isinstance(r["default_modes"], str) else ", ".join(r["default_modes"])
        avail = "[green]yes[/green]" if r["available"] else "[red]no[/red]"
        table.add_row(escape(r["op"]), escape(r["candidate"]), escape(modes), avail,
                      escape(r["reason"] or r["description"]))
    return table
