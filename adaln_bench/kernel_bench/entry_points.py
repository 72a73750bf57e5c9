"""The bundled projection library's C entry points, each alone on preallocated buffers (forward, d_temb, dW, db):
where a library's time goes. The inputs are the seeded draws every subject is timed on."""
from __future__ import annotations

from typing import Callable, Optional

import torch

from adaln_bench.harness.measurement import plan as P
from adaln_bench.ops.draws import draw_rows, draw_upstream
from adaln_bench.ops.registry import get_operator
from adaln_bench.shape import Shape

PROJECTION = "adaln_projection"  # the operator whose bundled library has these entry points


def _stream(device: torch.device) -> Optional[int]:
    """The current stream at call time (a graph capture runs on a side stream); None off CUDA (tests)."""
    return torch.cuda.current_stream(device).cuda_stream if device.type == "cuda" else None


def entry_points(lib, shape: Shape, params: dict, tokens: int, device: torch.device) -> dict[str, Callable[[], None]]:
    """{"fwd", "d_temb", "dW", "db"}: each C entry point alone, after one forward that fills the activation."""
    d, n = shape.dim, shape.out_features
    temb = draw_rows(get_operator(PROJECTION), shape, P.ACCURACY_SEED, tokens, device)["temb"]
    dy = draw_upstream([(tokens, n)], [torch.bfloat16], P.ACCURACY_UPSTREAM_SEED, device)[0]
    weight, bias = params["w"], params["b"]
    act = torch.empty(tokens, d, dtype=torch.bfloat16, device=device)
    y = torch.empty(tokens, n, dtype=torch.bfloat16, device=device)
    dtemb = torch.empty(tokens, d, device=device)
    dw = torch.empty(n, d, dtype=torch.bfloat16, device=device)
    db = torch.empty(n, dtype=torch.bfloat16, device=device)
    scratch_bytes = max(lib.dtemb_scratch_bytes(tokens, d, n), lib.gemm_ws_bytes)
    scratch = torch.empty(scratch_bytes, dtype=torch.uint8, device=device)
    index = device.index or 0

    def ptr(t: Optional[torch.Tensor]) -> Optional[int]:
        return None if t is None else t.data_ptr()

    def backward(out_dtemb, out_dw, out_db) -> Callable[[], None]:
        return lambda: lib.backward(ptr(dy), ptr(weight), ptr(temb), ptr(act), ptr(out_dtemb), ptr(out_dw),
                                    ptr(out_db), tokens, d, n, ptr(scratch), scratch_bytes, index, _stream(device))

    def forward() -> None:
        lib.forward(ptr(temb), ptr(weight), ptr(bias), ptr(act), ptr(y), tokens, d, n, ptr(scratch),
                    lib.gemm_ws_bytes, index, _stream(device))

    forward()  # act for the backward entries
    return {"fwd": forward, "d_temb": backward(dtemb, None, None), "dW": backward(None, dw, None),
            "db": backward(None, None, db)}
