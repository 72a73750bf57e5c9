"""One cold-start case of the bundled kernel, run as its own fresh process by test_cold_start_gpu.py.

    python cold_start_case.py first_step|foreign_thread|graph T

first_step: the process's first forward, then one backward with torch's default (multithreaded) autograd,
whose device thread has never touched CUDA. foreign_thread: forward on the main thread, then the backward
started from a threading.Thread that has never touched CUDA. graph: forward, and forward + backward,
captured in CUDA graphs and replayed; the replays must equal eager bitwise.
Prints one JSON line with what it checked; any failure raises (non-zero exit) or kills the process.
ADALN_BENCH_BUNDLED_PATH=portable forces the portable code path.
"""
from __future__ import annotations

import json
import sys
import threading

import torch

D, N = 2688, 6 * 3 * 512  # the H3 width; a smaller N keeps each process short


def inputs(t: int):
    g = torch.Generator("cuda").manual_seed(1000 + t)
    temb = torch.randn(t, D, generator=g, device="cuda")
    w = (torch.randn(N, D, generator=g, device="cuda") * D ** -0.5).to(torch.bfloat16)
    b = (torch.randn(N, generator=g, device="cuda") * 0.02).to(torch.bfloat16)
    dy = torch.randn(t, N, generator=g, device="cuda").to(torch.bfloat16)
    return temb, w, b, dy


def leaves(*xs):
    return [x.detach().clone().requires_grad_(True) for x in xs]


def rel(x: torch.Tensor, ref: torch.Tensor) -> float:
    return ((x.double() - ref).abs().max() / ref.abs().max()).item()


def check_against_fp64(y, grads, temb, w, b, dy) -> dict:
    t64, w64, b64 = leaves(temb.double(), w.double(), b.double())
    ref = torch.nn.functional.linear(torch.nn.functional.silu(t64), w64, b64)
    ref.backward(dy.double())
    errs = {"fwd": rel(y, ref.detach()), "temb": rel(grads[0], t64.grad), "w": rel(grads[1], w64.grad),
            "b": rel(grads[2], b64.grad)}
    # bf16 output and dW/db roundings; the kernel keeps d_temb in fp32.
    limits = {"fwd": 1e-2, "temb": 1e-5, "w": 1e-2, "b": 1e-2}
    bad = {k: v for k, v in errs.items() if not v <= limits[k]}
    if bad:
        raise AssertionError(f"errors against FP64 over their limits: {bad}")
    return errs


def eager_step(fwd, temb, w, b, dy):
    t, wl, bl = leaves(temb, w, b)
    y = fwd(t, wl, bl)
    y.backward(dy)
    return y.detach(), (t.grad, wl.grad, bl.grad)


def first_step(fwd, t: int) -> dict:
    temb, w, b, dy = inputs(t)
    y, grads = eager_step(fwd, temb, w, b, dy)
    torch.cuda.synchronize()
    return check_against_fp64(y, grads, temb, w, b, dy)


def foreign_thread(fwd, t: int) -> dict:
    temb, w, b, dy = inputs(t)
    tl, wl, bl = leaves(temb, w, b)
    y = fwd(tl, wl, bl)
    failure: list[BaseException] = []

    def backward() -> None:
        try:
            y.backward(dy)
            torch.cuda.synchronize()
        except BaseException as exc:  # re-raised on the main thread
            failure.append(exc)

    thread = threading.Thread(target=backward, name="never-touched-cuda")
    thread.start()
    thread.join()
    if failure:
        raise failure[0]
    return check_against_fp64(y.detach(), (tl.grad, wl.grad, bl.grad), temb, w, b, dy)


def graph(fwd, t: int) -> dict:
    temb, w, b, dy = inputs(t)
    y_eager, g_eager = eager_step(fwd, temb, w, b, dy)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up off the default stream, as capture requires
        for _ in range(2):
            eager_step(fwd, temb, w, b, dy)
    torch.cuda.current_stream().wait_stream(side)

    fwd_graph = torch.cuda.CUDAGraph()
    with torch.no_grad(), torch.cuda.graph(fwd_graph):
        y_static = fwd(temb, w, b)
    step_graph = torch.cuda.CUDAGraph()
    tl, wl, bl = leaves(temb, w, b)
    with torch.cuda.graph(step_graph):
        y_step = fwd(tl, wl, bl)
        grads = torch.autograd.grad(y_step, (tl, wl, bl), dy)
    for _ in range(3):
        fwd_graph.replay()
        step_graph.replay()
    torch.cuda.synchronize()
    same = {
        "fwd_graph": torch.equal(y_static, y_eager),
        "step_graph_out": torch.equal(y_step, y_eager),
        "step_graph_grads": all(torch.equal(a, e) for a, e in zip(grads, g_eager)),
    }
    if not all(same.values()):
        raise AssertionError(f"graph replay differs from eager: {same}")
    errs = check_against_fp64(y_eager, g_eager, temb, w, b, dy)
    return {**errs, **same}


def main(argv: list[str]) -> int:
    case, t = argv[1], int(argv[2])
    from adaln_bench.kernels.bundled import candidate as C

    lib = C.get_library(torch.device("cuda", torch.cuda.current_device()))
    fwd = C.make_forward(lib)
    result = {"first_step": first_step, "foreign_thread": foreign_thread, "graph": graph}[case](fwd, t)
    print(json.dumps({"case": case, "T": t, "path": lib.target.path, **result}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
