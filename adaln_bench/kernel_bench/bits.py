"""Bits: is each library batch-invariant across its tile tiers, and does it give the same bits as the others?

Not a replacement for the harness's probes (`adaln-bench run`, which a recipe must pass before it ships):
a quick check, in the benchmark's own process, of exactly what a tile change can break. One seeded batch of
`FULL_ROWS` rows is run whole; its prefixes at every size in `SIZES` (both sides of each tier bound of
sm90_config.h and of the portable path's 512-row d_act block; the sm90 path's 2048-row block is crossed in
tests/gpu), three rows alone and the batch reversed must give the same output and d_temb rows, bit for bit.
Libraries are compared with the first one on the whole batch.
"""
from __future__ import annotations

from typing import Callable, Optional

import torch

from adaln_bench.harness.measurement import plan as P
from adaln_bench.harness.measurement.accuracy import measure_accuracy
from adaln_bench.ops.adaln_projection.inputs import Params, make_temb, make_upstream
from adaln_bench.harness.measurement.subject import Subject as HarnessSubject
from adaln_bench.ops.adaln_projection import OPERATOR
from adaln_bench.ops.candidates import Implementation
from adaln_bench.shape import Shape

FULL_ROWS = 2048
SIZES = (1, 2, 3, 4, 8, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 129, 255, 256, 257, 300, 511, 512, 513, 1000,
         1024, 1500, 2047)
SEED = P.FULL.seeds[0]


def _run(forward: Callable, temb: torch.Tensor, dy: torch.Tensor, params: Params) -> tuple[torch.Tensor, torch.Tensor]:
    leaf = temb.detach().clone().requires_grad_()
    y = forward(leaf, params.weight, params.bias)
    y.backward(dy)
    return y.detach(), leaf.grad.detach()


def _rows_differ(a: torch.Tensor, b: torch.Tensor) -> int:
    return int((a != b).reshape(a.shape[0], -1).any(dim=1).sum())


def check_one(forward: Callable, temb: torch.Tensor, dy: torch.Tensor, params: Params,
              sizes: tuple[int, ...]) -> tuple[dict, tuple[torch.Tensor, torch.Tensor]]:
    """Rows that differ from the whole batch's: prefixes, singles, the reversed batch. Returns the counts and
    the whole batch's (output, d_temb)."""
    n = temb.shape[0]
    y_full, g_full = _run(forward, temb, dy, params)
    comparisons, differ, failures = 0, {"out": 0, "d_temb": 0}, []

    def compare(what: str, y: torch.Tensor, g: torch.Tensor, rows: slice | list[int] | torch.Tensor) -> None:
        nonlocal comparisons
        dy_rows, dg_rows = _rows_differ(y, y_full[rows]), _rows_differ(g, g_full[rows])
        comparisons += y.shape[0]
        differ["out"] += dy_rows
        differ["d_temb"] += dg_rows
        if (dy_rows or dg_rows) and len(failures) < 8:
            failures.append({"what": what, "out_rows": dy_rows, "d_temb_rows": dg_rows})

    for m in (s for s in sizes if s < n):
        compare(f"prefix {m}", *_run(forward, temb[:m], dy[:m], params), slice(0, m))
    for i in sorted({0, 1, n - 1}):
        compare(f"row {i} alone", *_run(forward, temb[i:i + 1], dy[i:i + 1], params), slice(i, i + 1))
    rev = torch.arange(n - 1, -1, -1, device=temb.device)
    compare("reversed", *_run(forward, temb[rev], dy[rev], params), rev)
    result = {"rows_compared": comparisons, "rows_differ": differ, "invariant": not any(differ.values()),
              "failures": failures}
    return result, (y_full, g_full)


def check(subjects: list, params: Params, shape: Shape, device: torch.device, full_rows: int = FULL_ROWS,
          sizes: tuple[int, ...] = SIZES, log: Optional[Callable[..., None]] = None) -> dict:
    temb = make_temb(full_rows, shape, SEED, device)
    dy = make_upstream((full_rows, shape.out_features), torch.bfloat16, SEED, device)
    out: dict = {"full_rows": full_rows, "seed": SEED, "sizes": [s for s in sizes if s < full_rows], "libraries": {}}
    first: Optional[tuple[str, tuple[torch.Tensor, torch.Tensor]]] = None
    for s in subjects:
        try:
            result, (y, g) = check_one(s.forward, temb, dy, params, sizes)
        except Exception as exc:  # noqa: BLE001 - recorded; the other libraries are still checked
            out["libraries"][s.name] = {"error": f"{type(exc).__name__}: {exc}"}
            continue
        if first is None:
            first = (s.name, (y, g))
        else:
            ref_name, (y0, g0) = first
            result["vs_" + ref_name] = {"out_rows_differ": _rows_differ(y, y0), "d_temb_rows_differ": _rows_differ(g, g0)}
        out["libraries"][s.name] = result
        if log:
            log(f"[bits] {s.name}: {result}")
        del y, g
        torch.cuda.empty_cache()
    return out


def accuracy(subjects: list, params: Params, shape: Shape, device: torch.device, sizes: list[int]) -> dict:
    """Relative errors against FP64 (the harness's measure): forward, d_temb, dW, db, per subject and T."""
    out: dict = {}
    for s in subjects:
        subject = HarnessSubject.for_forward(OPERATOR, Implementation(source=s.name, has_backward=True,
                                                                      forward=s.forward), shape)
        for t in sizes:
            try:
                fwd, grads = measure_accuracy(subject, params.as_inputs(), shape, device, t)
                errors = grads.errors()
                out.setdefault(s.name, {})[str(t)] = {"fwd": fwd, "d_temb": errors["temb"], "dW": errors["w"],
                                                      "db": errors["b"]}
            except Exception as exc:  # noqa: BLE001 - recorded; the other subjects are still measured
                out.setdefault(s.name, {})[str(t)] = {"error": f"{type(exc).__name__}: {exc}"}
    return out
