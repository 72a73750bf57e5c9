"""GPU machine, after `stage_megatron.py install`: Transformer Engine imports, and its Linear and RMSNorm run
forward and backward in bf16 and fp32, each output and gradient checked against an FP64 reference.

    python3 tools/device/te_check.py [--megatron-backend triton|te_native] [--out FILE.json]

With --megatron-backend, Megatron's enable_batch_invariant_mode(backend=...) from the tree named by
$ADALN_BENCH_MEGATRON_LM (the staged Megatron-LM main) is switched on first, so the same checks run on TE
as Megatron patched it. Prints one line per check (max |y - ref| / max |ref|); exit 1 if anything raised or
an error is over its bound.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback

import torch
import torch.nn.functional as F

# Loose bounds: this checks that the staged kernels run and compute the right thing, not how accurately.
BOUND = {torch.bfloat16: 3e-2, torch.float32: 5e-3}
T, K, N = 256, 1024, 3072


def rel(x: torch.Tensor, ref: torch.Tensor) -> float:
    return float((x.double() - ref).abs().max() / ref.abs().max().clamp_min(1e-300))


def check_linear(te, dtype: torch.dtype) -> dict[str, float]:
    layer = te.Linear(K, N, bias=True, params_dtype=dtype, device="cuda")
    x = torch.randn(T, K, device="cuda", dtype=dtype, requires_grad=True)
    upstream = torch.randn(T, N, device="cuda", dtype=dtype)
    y = layer(x)
    y.backward(upstream)
    x64 = x.detach().double().requires_grad_()
    w64 = layer.weight.detach().double().requires_grad_()
    b64 = layer.bias.detach().double().requires_grad_()
    y64 = F.linear(x64, w64, b64)
    y64.backward(upstream.double())
    return {"fwd": rel(y, y64), "d_x": rel(x.grad, x64.grad), "d_w": rel(layer.weight.grad, w64.grad),
            "d_b": rel(layer.bias.grad, b64.grad)}


def check_rmsnorm(te, dtype: torch.dtype) -> dict[str, float]:
    eps = 1e-6
    layer = te.RMSNorm(N, eps=eps, params_dtype=dtype, device="cuda")
    with torch.no_grad():
        layer.weight.copy_(1 + 0.1 * torch.randn(N, device="cuda", dtype=dtype))
    x = torch.randn(T, N, device="cuda", dtype=dtype, requires_grad=True)
    upstream = torch.randn(T, N, device="cuda", dtype=dtype)
    y = layer(x)
    y.backward(upstream)
    x64 = x.detach().double().requires_grad_()
    w64 = layer.weight.detach().double().requires_grad_()
    y64 = x64 * torch.rsqrt(x64.pow(2).mean(-1, keepdim=True) + eps) * w64
    y64.backward(upstream.double())
    return {"fwd": rel(y, y64), "d_x": rel(x.grad, x64.grad), "d_w": rel(layer.weight.grad, w64.grad)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--megatron-backend", choices=("triton", "te_native"))
    parser.add_argument("--out", help="write the results as JSON here")
    args = parser.parse_args()
    result: dict = {"torch": torch.__version__, "torch_git_version": torch.version.git_version,
                    "megatron_backend": args.megatron_backend, "checks": {}, "errors": []}
    started = time.time()
    ok = True
    try:
        import transformer_engine
        import transformer_engine.common as te_common
        import transformer_engine.pytorch as te

        result["transformer_engine"] = getattr(transformer_engine, "__version__", None)
        result["transformer_engine_file"] = te.__file__
        core = getattr(te_common, "_TE_LIB_CTYPES", None)
        result["core_library"] = getattr(core, "_name", None)
        import transformer_engine_torch

        result["transformer_engine_torch_file"] = transformer_engine_torch.__file__
        if args.megatron_backend:
            source = os.environ.get("ADALN_BENCH_MEGATRON_LM")
            if source:
                sys.path.insert(0, source)
            from megatron.core.transformer.custom_layers import batch_invariant_kernels as bik

            bik.enable_batch_invariant_mode(backend=args.megatron_backend)
            result["megatron_file"] = bik.__file__
    except Exception as exc:  # the import itself is what this checks first
        traceback.print_exc()
        result["errors"].append(f"import: {type(exc).__name__}: {exc}")
        ok = False
    if ok:
        torch.manual_seed(0)
        for name, check in (("Linear", check_linear), ("RMSNorm", check_rmsnorm)):
            for dtype in (torch.bfloat16, torch.float32):
                key = f"{name} {str(dtype).removeprefix('torch.')}"
                try:
                    errors = check(te, dtype)
                except Exception as exc:
                    traceback.print_exc()
                    result["errors"].append(f"{key}: {type(exc).__name__}: {exc}")
                    ok = False
                    continue
                over = [k for k, v in errors.items() if not v <= BOUND[dtype]]
                ok = ok and not over
                result["checks"][key] = errors
                print(f"{key:16} " + "  ".join(f"{k} {v:.2e}" for k, v in errors.items())
                      + (f"  OVER {BOUND[dtype]:.0e}: {', '.join(over)}" if over else "  ok"))
    result["ok"] = ok
    result["seconds"] = round(time.time() - started, 1)
    for line in result["errors"]:
        print(f"error: {line}")
    if args.out:
        with open(args.out, "w") as handle:
            json.dump(result, handle, indent=1)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
