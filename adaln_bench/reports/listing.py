"""What `adaln-bench ops`, `candidates` and `modes` show: rows as data (for --json), a compact table that
reads at 80 columns (names never split), and the details behind --details as blocks that read at any width."""
from __future__ import annotations

from typing import Optional, Sequence

from rich import box
from rich.console import Console, Group, RenderableType
from rich.markup import escape
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from adaln_bench.ops import candidates as registry
from adaln_bench.ops.registry import all_operators, get_operator
from adaln_bench.ops.sizes import dims_text
from adaln_bench.reports.terminal import stdout_console


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
    """One line per operator where the candidates fit: its sizes, modes and candidates."""
    table = listing_table("operators (adaln-bench run --op NAME; --details for tensors and probes)")
    table.add_column("operator", no_wrap=True)
    table.add_column("sizes (rows)", no_wrap=True)
    table.add_column("modes", no_wrap=True)
    table.add_column("candidates", min_width=MIN_TEXT)
    for r in rows:
        table.add_row(escape(r["op"]), escape(_sizes_short(r["sizes"])), escape(_modes_text(r["modes"])),
                      escape(", ".join(r["candidates"])))
    return table


def ops_details(rows: list[dict]) -> list[RenderableType]:
    """Everything `ops --json` says, as one block per operator that reads at any width."""
    blocks = []
    for r in rows:
        probes = r["probes"]
        sub = ", ".join(str(n) for n in probes["sub_batch_sizes"]) or "—"
        rows_at = ", ".join(str(n) for n in probes["all_rows"]) or "—"
        modes = _modes_text(r["modes"])
        blocks.append(detail_block(r["op"], r["description"], [
            ("tensors", "\n".join(r["tensors"])),
            ("outputs", ", ".join(r["outputs"])),
            ("gradients", ", ".join(r["grads"]) or "—"),
            ("sizes", ", ".join(r["sizes"])),
            ("probes", f"all rows at {rows_at}; full batch {probes['full_batch']}; sub-batches {sub}"),
            ("modes", f"{modes}: {r['modes_why']}"),
            ("candidates", ", ".join(r["candidates"])),
            ("stock path", r["stock"] or "—"),
        ]))
    return blocks


def _sizes_short(sizes: list[str]) -> str:
    """["T=1", "T=3"] → "T: 1 3": one symbol, its values."""
    symbols = dict.fromkeys(s.split("=", 1)[0] for s in sizes)
    if len(symbols) != 1:
        return ", ".join(sizes)
    (symbol,) = symbols
    return f"{symbol}: " + " ".join(s.split("=", 1)[1] for s in sizes)


def _modes_text(modes) -> str:
    return modes if isinstance(modes, str) else ", ".join(modes)


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


def candidates_table(rows: list[dict]) -> list[RenderableType]:
    """One line per candidate, its operator named once; why one cannot run here is a numbered note below."""
    table = listing_table("candidates (also any module:function; --details: what each is)")
    table.add_column("operator", no_wrap=True)
    table.add_column("candidate", no_wrap=True)
    table.add_column("default modes", no_wrap=True)
    table.add_column("here")  # "no [2]" may wrap below 80 columns; names may not
    notes = Notes()
    previous = None
    for r in rows:
        here = "[green]yes[/green]" if r["available"] else f"[red]no[/red] {notes.mark(r['reason'] or 'unavailable')}"
        table.add_row(escape(r["op"]) if r["op"] != previous else "", escape(r["candidate"]),
                      escape(_modes_text(r["default_modes"])), here)
        previous = r["op"]
    return [table, *notes.lines()]


def candidates_details(rows: list[dict]) -> list[RenderableType]:
    """Per operator, each candidate with its description and, where it cannot run here, why."""
    tables = []
    for op in dict.fromkeys(r["op"] for r in rows):
        table = listing_table(op)
        table.add_column("candidate", no_wrap=True)
        table.add_column("default modes", no_wrap=True)
        table.add_column("here", no_wrap=True)
        table.add_column("description / why not here", min_width=MIN_TEXT)
        for r in (r for r in rows if r["op"] == op):
            here = "[green]yes[/green]" if r["available"] else "[red]no[/red]"
            text = r["description"] + ("" if r["available"] else f"\nnot here: {r['reason']}")
            table.add_row(escape(r["candidate"]), escape(_modes_text(r["default_modes"])), here, escape(text))
        tables.append(table)
    return tables


# --- modes ---------------------------------------------------------------------------------------------


def _available(r: dict, notes: Optional["Notes"] = None) -> str:
    if r["available"] is None:
        return "not checked"
    if r["available"]:
        return "[green]yes[/green]"
    return f"[red]{escape(r['status'])}[/red]" + (f" {notes.mark(r['reason'])}" if notes and r["reason"] else "")


def _library(r: dict) -> str:
    return f"{r['library']} {r['library_version'] or ''}".strip() if r["library"] else "—"


def modes_table(rows: list[dict]) -> list[RenderableType]:
    """One line per mode; why one is not available here is a numbered note below."""
    table = listing_table("modes (--details for environments and switches)")
    for col in ("mode", "kind", "available", "library"):
        table.add_column(col, no_wrap=col in ("mode", "kind"))
    notes = Notes()
    for r in rows:
        table.add_row(escape(r["mode"]), escape(r["kind"]), _available(r, notes), escape(_library(r)))
    return [table, *notes.lines()]


def modes_details(rows: list[dict]) -> list[RenderableType]:
    blocks = []
    for r in rows:
        env = " ".join(f"{k}={v}" for k, v in r["environment"].items()) or "—"
        fields = [("kind", r["kind"]), ("available", None), ("environment", env), ("library", _library(r)),
                  ("what", r["description"] or "—")]
        if r["switch"]:
            fields.append(("switch", r["switch"]))
        if r["reason"]:
            fields.append(("why not", r["reason"]))
        blocks.append(detail_block(r["mode"], None, fields, markup={"available": _available(r)}))
    return blocks


# --- shared pieces ---------------------------------------------------------------------------------------


def print_listing(parts: list[RenderableType]) -> None:
    console = stdout_console()
    for part in parts:
        console.print(part)


MIN_TEXT = 24  # a wrapped text column never narrower: words wrap whole, names never split


def listing_table(title: str) -> Table:
    """A table with a rule under its head and no outer frame: two columns fewer of borders at 80."""
    return Table(title=title, box=box.SIMPLE_HEAD, title_justify="left", pad_edge=False, show_edge=False,
                 collapse_padding=True)


def detail_block(name: str, description: Optional[str], fields: list[tuple[str, Optional[str]]],
                 markup: Optional[dict[str, str]] = None) -> RenderableType:
    """`name: description`, then one indented `key  value` line per field, values wrapped at words."""
    grid = Table.grid(padding=(0, 2))
    grid.add_column(no_wrap=True, style="bold")
    grid.add_column(min_width=MIN_TEXT)
    for key, value in fields:
        grid.add_row(escape(key), (markup or {}).get(key) or escape(value or ""))
    head = f"[bold]{escape(name)}[/bold]" + (f": {escape(description)}" if description else "")
    return Group(head, Padding(grid, (0, 0, 1, 2)))


class Notes:
    """Numbered notes: each distinct text once, referred to as [n] where it applies."""

    def __init__(self) -> None:
        self._texts: dict[str, int] = {}

    def mark(self, text: str) -> str:
        n = self._texts.setdefault(text, len(self._texts) + 1)
        return escape(f"[{n}]")

    def lines(self) -> list[RenderableType]:
        return [Text(f"[{n}] {text}") for text, n in self._texts.items()]
