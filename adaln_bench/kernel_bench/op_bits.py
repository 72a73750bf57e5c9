"""Bits and errors of `kernel-bench --op`, in the benchmark's first process (a quick check, not the harness's
probes, which a candidate must pass before it ships).

Bits across sizes: one seeded batch of the largest size is run whole; its prefixes at every other size, and
`SINGLE_ROWS` rows alone, must give the whole batch's output and row-gradient rows bit for bit; at every size the
parameter (table) gradients of two identical runs must be equal. Errors: the harness's measure against FP64
(inputs of seed 11) at every size, for the stock path and each candidate on the same inputs.
"""
from __future__ import annotations

from typing import Callable, Optional, Sequence

import torch

from adaln_bench.harness.measurement import plan as P
from adaln_bench.harness.measurement.accuracy import measure_accuracy
from adaln_bench.harness.measurement.probes import RunOutput
from adaln_bench.harness.measurement.subject import Subject
from adaln_bench.harness.measurement.workload import Workload
from adaln_bench.shape import Shape

SEED = P.FULL.seeds[0]


def single_rows(n: int) -> list[int]:
    """The first, a middle and the last row."""
    return sorted({0, n // 2, n - 1})


def rows_differ(whole: Sequence[torch.Tensor], part: Sequence[torch.Tensor], rows: Sequence[int]) -> int:
    """Rows of `part` that differ from rows `rows` of `whole` in any of the tensors (outputs or row gradients)."""
    index = torch.as_tensor(list(rows), device=whole[0].device)
    differ = torch.zeros(len(rows), dtype=torch.bool, device=whole[0].device)
    for w, p in zip(whole, part):
        differ |= (w.index_select(0, index) != p).reshape(len(rows), -1).any(dim=1)
    return int(differ.sum())


def _rows(run: RunOutput) -> list[torch.Tensor]:
    return list(run.outs) + list(run.row_grads or ())


def params_equal(a: RunOutput, b: RunOutput) -> Optional[bool]:
    if a.param_grads is None:
        return None
    return all(bool(torch.equal(x, y)) for x, y in zip(a.param_grads, b.param_grads))


def check_subject(subject: Subject, params: dict, shape: Shape, device: torch.device, sizes: Sequence[int]) -> dict:
    """Prefixes and single rows against the whole batch; parameter gradients repeated at every size."""
    n = max(sizes)
    run = Workload(subject, params, shape, device)
    whole = run(SEED, n, range(n))
    out: dict = {"rows_compared": 0, "rows_differ": 0, "params_repeatable": {}, "failures": []}

    def compare(what: str, rows: list[int]) -> None:
        got = run(SEED, n, rows)
        bad = rows_differ(_rows(whole), _rows(got), rows)
        out["rows_compared"] += len(rows)
        out["rows_differ"] += bad
        if bad:
            out["failures"].append(f"{what}: {bad} of {len(rows)} rows differ")

    for s in sorted(set(sizes)):
        if s < n:
            compare(f"prefix {s}", list(range(s)))
        first = whole if s == n else run(SEED, n, range(s))
        out["params_repeatable"][str(s)] = params_equal(first, run(SEED, n, range(s)))
    for i in single_rows(n):
        compare(f"row {i} alone", [i])
    repeat = [v for v in out["params_repeatable"].values() if v is not None]
    out["invariant"] = out["rows_differ"] == 0
    out["repeatable"] = all(repeat) if repeat else None
    return out


def check(subjects: dict[str, Subject], params: dict, shape: Shape, device: torch.device, sizes: Sequence[int],
          log: Callable[..., None] = lambda *a: None) -> dict:
    result: dict = {"seed": SEED, "sizes": sorted(set(sizes)), "subjects": {}}
    for name, subject in subjects.items():
        try:
            result["subjects"][name] = check_subject(subject, params, shape, device, sizes)
        except Exception as exc:  # noqa: BLE001 - recorded; the other subjects are still checked
            result["subjects"][name] = {"error": f"{type(exc).__name__}: {exc}"}
        log(f"[bits] {name}: {result['subjects'][name]}")
        if device.type == "cuda":
            torch.cuda.empty_cache()
    return result


def accuracy(subjects: dict[str, Subject], params: dict, shape: Shape, device: torch.device,
             sizes: Sequence[int]) -> dict:
    """{subject: {S: {"fwd": error, "grads": {name: error}}}} against FP64 (the harness's measure)."""
    out: dict = {}
    for name, subject in subjects.items():
        for s in sizes:
            try:
                fwd, grads = measure_accuracy(subject, params, shape, device, s)
                entry = {"fwd": fwd, "grads": grads.errors() if grads is not None else {}}
            except Exception as exc:  # noqa: BLE001
                entry = {"error": f"{type(exc).__name__}: {exc}"}
            out.setdefault(name, {})[str(s)] = entry
            if device.type == "cuda":
                torch.cuda.empty_cache()
    return out

