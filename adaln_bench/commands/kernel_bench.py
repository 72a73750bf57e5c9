"""`adaln-bench kernel-bench`: the arguments, then kernel_bench/run.py does the rest."""
from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer


def kernel_bench_command(
    library: Optional[List[str]] = typer.Option(
        None, "--library", "-l", metavar="LIBRARY",
        help="A bundled projection library: sm90, portable, or NAME=PATH:DEFINE,DEFINE (an sm90_config.h variant), "
             "or NAME=FILE.so. Repeatable; default without --op: every code path this GPU can run."),
    op: Optional[List[str]] = typer.Option(
        None, "--op", metavar="OP", help="An operator to time against its stock path instead of the projection's libraries against "
        "cuBLAS (repeatable; 'all': every operator with a bundled candidate). See --candidate."),
    candidate: Optional[List[str]] = typer.Option(
        None, "--candidate", "-c", metavar="NAME", help="With --op: the candidates timed beside the stock path (default: bundled)."),
    sizes: Optional[str] = typer.Option(None, help="Token counts, comma-separated (default: 1,3,4,64,256,2048; "
                                        "with --op, 4097,32768,131072 for the token operators)."),
    processes: int = typer.Option(3, min=1, help="Fresh processes; each figure is the median over them."),
    entries: bool = typer.Option(True, help="Also time each bundled library's C entry point alone (forward, d_temb, "
                                 "dW, db)."),
    bits: bool = typer.Option(True, help="Check bits across sizes and errors against FP64 (one more process)."),
    accuracy_sizes: str = typer.Option("64,2048", help="Without --op: T at which errors against FP64 are measured."),
    shape: str = typer.Option("h3", help="Shape preset."),
    out: Path = typer.Option(Path("kernel-bench-out"), help="Directory for the JSON, Markdown and logs."),
    name: Optional[str] = typer.Option(None, help="File stem (default kernel_bench.<commit>, with --op "
                                       "kernel_bench.ops.<commit>)."),
    process_timeout: float = typer.Option(540.0, help="Seconds one process may take."),
    budget: Optional[float] = typer.Option(None, help="Seconds all processes together may take (a process "
                                           "that would run past it is cut short or skipped); with --op only."),
) -> None:
    """Time the bundled projection libraries against cuBLAS at each T in device time (needs a CUDA GPU); with
    --op, an operator's candidates against its stock path. The output is read by `report` and `diff`.

    Exit 0 when every process ran and every candidate kept its bits across sizes; 1 when one was not invariant
    or a subject or process failed; 2 for bad input or no GPU.
    """
    from adaln_bench.kernel_bench.run import Options, run

    options = Options(ops=list(op or []), candidates=list(candidate or []), libraries=list(library or []),
                      sizes=sizes, processes=processes, entries=entries, bits=bits, accuracy_sizes=accuracy_sizes,
                      shape=shape, out=out, name=name, process_timeout=process_timeout, budget=budget)
    raise typer.Exit(run(options, echo=typer.echo))
