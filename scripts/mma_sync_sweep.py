"""How fast can an mma.sync GEMM (the portable path's instruction, the only tensor-core one besides tcgen05 that
Blackwell runs) do the forward and dW GEMMs of the H3 shape on this GPU? An independent answer to git:NOTES.md §5
item 4: Triton's own matmul, forced off wgmma (DISABLE_MMA_V3=1), over a grid of tiles, warps and stages,
each timed in CUDA-graph replay interleaved with cuBLAS (torch's wgmma GEMM for the same product), so a clock
that drops under load moves both. The PTX of each kernel is checked for mma.sync and the absence of wgmma.

Forward: Y (T, N) = act (T, D) · W (N, D)^T + b, fp32 accumulation, one bf16 rounding (the bundled kernel's
recipe); the best tile's Y is compared bit for bit with the portable library's forward when one is given
(-l portable). dW: dW (N, D) = dY (T, N)^T · act (T, D), K = T.

Usage (GPU): python3 scripts/mma_sync_sweep.py --sizes 128,256,2048 [--dw-sizes 256,2048] [-l portable]
"""
from __future__ import annotations

import os

os.environ["DISABLE_MMA_V3"] = "1"  # read by Triton's compiler at each compile: mma.sync (MMAv2) on sm_90

import argparse  # noqa: E402
import itertools  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402

import functools  # noqa: E402

import torch  # noqa: E402

from adaln_bench.harness.device_time import StopRule, measure_interleaved  # noqa: E402
from adaln_bench.harness.shapes import PRESETS  # noqa: E402

RULE = StopRule(target=0.01, min_samples=10, max_samples=60, max_seconds=2.0, batch=10)
SMEM_LIMIT = 227 * 1024
MAX_ACC_PER_THREAD = 128  # fp32 accumulators a thread holds; above this the tile spills


@functools.cache
def gemm_kernel():
    """The Triton kernel, built on first use (Triton is imported here: the rest of the script runs without it)."""
    import triton
    import triton.language as tl

    @triton.jit
    def gemm_kernel(a_ptr, b_ptr, c_ptr, bias_ptr, M, N, K, sam, sak, sbk, sbn, scm, scn,
                    HAS_BIAS: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP: tl.constexpr):
        # C (M, N) = A (M, K) · B (K, N) [+ bias over N]; tiles in groups of GROUP along M for L2 reuse.
        pid = tl.program_id(0)
        tiles_m, tiles_n = tl.cdiv(M, BM), tl.cdiv(N, BN)
        per_group = GROUP * tiles_n
        first_m = (pid // per_group) * GROUP
        rows = min(tiles_m - first_m, GROUP)
        pm = first_m + (pid % per_group) % rows
        pn = (pid % per_group) // rows
        rm = pm * BM + tl.arange(0, BM)
        rn = pn * BN + tl.arange(0, BN)
        rk = tl.arange(0, BK)
        a = a_ptr + rm[:, None] * sam + rk[None, :] * sak
        b = b_ptr + rk[:, None] * sbk + rn[None, :] * sbn
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for k in range(0, K, BK):
            kk = k + rk
            x = tl.load(a, mask=(rm[:, None] < M) & (kk[None, :] < K), other=0.0)
            y = tl.load(b, mask=(kk[:, None] < K) & (rn[None, :] < N), other=0.0)
            acc = tl.dot(x, y, acc)
            a += BK * sak
            b += BK * sbk
        if HAS_BIAS:
            acc = acc + tl.load(bias_ptr + rn, mask=rn < N, other=0.0).to(tl.float32)[None, :]
        c = c_ptr + rm[:, None] * scm + rn[None, :] * scn
        tl.store(c, acc.to(tl.bfloat16), mask=(rm[:, None] < M) & (rn[None, :] < N))

    return gemm_kernel


def configs(m_sizes, n_sizes, k_sizes):
    for bm, bn, bk, warps, stages in itertools.product(m_sizes, n_sizes, k_sizes, (4, 8), (3, 4, 5)):
        if (bm + bn) * bk * 2 * stages > SMEM_LIMIT or bm * bn // (32 * warps) > MAX_ACC_PER_THREAD:
            continue
        if bm * bn < 128 * 128 or (bk == 64 and stages == 5):  # small tiles re-read W; 5 deep k-64 stages idle
            continue
        yield dict(BM=bm, BN=bn, BK=bk, num_warps=warps, num_stages=stages)


def launcher(a, b, c, bias, M, N, K, strides, cfg):
    grid = (-(-M // cfg["BM"]) * -(-N // cfg["BN"]),)
    meta = dict(BM=cfg["BM"], BN=cfg["BN"], BK=cfg["BK"], GROUP=8, num_warps=cfg["num_warps"],
                num_stages=cfg["num_stages"])

    def run():
        return gemm_kernel()[grid](a, b, c, bias if bias is not None else c, M, N, K, *strides,
                                 HAS_BIAS=bias is not None, **meta)
    return run


def instructions(compiled) -> str:
    ptx = compiled.asm.get("ptx", "")
    return ("mma.sync" if "mma.sync" in ptx else "no-mma.sync") + ("+wgmma" if "wgmma" in ptx else "")


def sweep(name, make, flops, cublas_fn, cfgs, out):
    """Each tile interleaved with cuBLAS; returns the rows (best first)."""
    rows = []
    for cfg in cfgs:
        run = make(cfg)
        try:
            compiled = run()
            torch.cuda.synchronize()
        except Exception as exc:  # noqa: BLE001 - a tile Triton cannot build (resources) is recorded and skipped
            rows.append(dict(cfg, error=f"{type(exc).__name__}: {str(exc)[:120]}"))
            continue
        t = measure_interleaved({"cublas": cublas_fn, "triton": run}, torch.device("cuda", 0), RULE)
        us, ref = t["triton"].median_us, t["cublas"].median_us
        rows.append(dict(cfg, us=round(us, 2), cublas_us=round(ref, 2), ratio=round(us / ref, 3),
                         tflops=round(flops / us / 1e6, 1), isa=instructions(compiled),
                         regs=getattr(compiled, "n_regs", None), spills=getattr(compiled, "n_spills", None)))
        print(f"{name} {cfg} -> {rows[-1].get('us')} us, x{rows[-1].get('ratio')}, {rows[-1].get('tflops')} TFLOP/s, "
              f"{rows[-1].get('isa')} regs {rows[-1].get('regs')} spills {rows[-1].get('spills')}", flush=True)
    out[name] = sorted(rows, key=lambda r: r.get("ratio", 1e9))
    return out[name]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="128,256,2048", help="T of the forward GEMM")
    ap.add_argument("--dw-sizes", default="", help="T of the dW GEMM")
    ap.add_argument("-l", "--library", default="", help="'portable': compare the best tile's bits with it")
    ap.add_argument("--json", default="", help="write every row here")
    args = ap.parse_args(argv)
    dev = torch.device("cuda", 0)
    shape = PRESETS["h3"]
    d, n = shape.dim, shape.out_features
    g = torch.Generator(device=dev).manual_seed(1)
    w = (torch.randn(n, d, generator=g, device=dev) * 0.02).to(torch.bfloat16)
    bias = (torch.randn(n, generator=g, device=dev) * 0.02).to(torch.bfloat16)
    lib = None
    if args.library:
        from adaln_bench.kernel_bench.subjects import library_subject, parse_library
        lib = library_subject(parse_library(args.library), dev).library
    import triton

    out: dict = {"gpu": torch.cuda.get_device_name(dev), "triton": triton.__version__, "torch": torch.__version__}
    summary = []
    for T in [int(x) for x in args.sizes.split(",") if x]:
        temb = torch.randn(T, d, generator=g, device=dev)
        act = torch.nn.functional.silu(temb).to(torch.bfloat16)
        y = torch.empty(T, n, dtype=torch.bfloat16, device=dev)
        # A = act (T, D) row-major; B (K = D, N) = W^T, i.e. W read with strides (1, D).
        strides = (act.stride(0), act.stride(1), w.stride(1), w.stride(0), y.stride(0), y.stride(1))

        def make(cfg, act=act, y=y, strides=strides, T=T):
            return launcher(act, w, y, bias, T, n, d, strides, cfg)

        def cublas(act=act):
            torch.nn.functional.linear(act, w, bias)

        m_sizes = [s for s in (64, 128, 256) if s <= max(64, T)]
        rows = sweep(f"fwd T={T}", make, 2.0 * T * n * d, cublas, list(configs(m_sizes, (64, 128, 256), (32, 64))),
                     out)
        best = next(r for r in rows if "us" in r)
        bits = None
        if lib is not None:  # the library's own act and Y, then the best tile on that act: the GEMMs' bits alone
            a2, y2 = torch.empty_like(act), torch.empty_like(y)
            scratch = torch.empty(lib.gemm_ws_bytes, dtype=torch.uint8, device=dev)
            lib.forward(temb.data_ptr(), w.data_ptr(), bias.data_ptr(), a2.data_ptr(), y2.data_ptr(), T, d, n,
                        scratch.data_ptr(), lib.gemm_ws_bytes, 0, torch.cuda.current_stream(dev).cuda_stream)
            launcher(a2, w, y, bias, T, n, d, strides, best)()
            torch.cuda.synchronize()
            bits = f"{int((y != y2).sum())} of {y.numel()} differ (act equal: {bool(torch.equal(a2, act))})"
        summary.append((f"fwd T={T}", best, bits))
    for T in [int(x) for x in args.dw_sizes.split(",") if x]:
        act = torch.randn(T, d, generator=g, device=dev).to(torch.bfloat16)
        dy = torch.randn(T, n, generator=g, device=dev).to(torch.bfloat16)
        dw = torch.empty(n, d, dtype=torch.bfloat16, device=dev)
        # A (M = N, K = T) = dY^T: dY read with strides (1, N); B = act (T, D) row-major.
        strides = (dy.stride(1), dy.stride(0), act.stride(0), act.stride(1), dw.stride(0), dw.stride(1))

        def make_dw(cfg, act=act, dy=dy, dw=dw, strides=strides, T=T):
            return launcher(dy, act, dw, None, n, d, T, strides, cfg)

        def cublas_dw(act=act, dy=dy):
            torch.mm(dy.t(), act)

        rows = sweep(f"dW T={T}", make_dw, 2.0 * T * n * d, cublas_dw,
                     list(configs((64, 128, 256), (64, 128, 256), (32, 64))), out)
        summary.append((f"dW T={T}", next(r for r in rows if "us" in r), None))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    print("\n| GEMM | best mma.sync tile (BM×BN×BK, warps, stages) | µs | cuBLAS µs | ×cuBLAS | TFLOP/s | ISA | bits |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for name, r, bits in summary:
        tile = f"{r['BM']}×{r['BN']}×{r['BK']}, {r['num_warps']}, {r['num_stages']}"
        print(f"| {name} | {tile} | {r['us']} | {r['cublas_us']} | {r['ratio']} | {r['tflops']} | {r['isa']} | "
              f"{bits or '-'} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
