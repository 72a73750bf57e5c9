"""Device time against the CUDA-event figures for candidates of the real op, on one GPU, in one process.

    python3 scripts/device_time_check.py [CANDIDATE …]     (default: diffusers bundled; plain mode)

Prints per candidate and T the event medians (RL-Kernel's figure, host-inclusive) beside device time
(method, median, samples, noise, SM clock) and writes the entries as JSON to $OUT/device_time_check.json
(or ./device-out). A check of harness/device_time.py on hardware before it is wired into the child;
not part of the harness.
"""
from __future__ import annotations

import json
import os
import sys
import traceback

import torch

sys.path.insert(0, os.getcwd())
from adaln_bench.harness.device_time import device_time_point  # noqa: E402
from adaln_bench.harness.inputs import make_params, make_temb  # noqa: E402
from adaln_bench.harness.shapes import PRESETS  # noqa: E402
from adaln_bench.harness.timing import time_call  # noqa: E402
from adaln_bench.kernels import registry  # noqa: E402

TOKENS = (1, 4, 64, 256, 2048)


def check(name: str, shape, params, device) -> dict:
    impl = registry.get(name).build(registry.BuildContext(mode="plain", device=device, dim=shape.dim,
                                                           hidden=shape.hidden, modalities=shape.modalities))
    rows = {}
    for tokens in TOKENS:
        temb = make_temb(tokens, shape, 11, device)
        ones = torch.ones((tokens, shape.out_features), dtype=torch.bfloat16, device=device)

        def forward() -> None:
            with torch.no_grad():
                impl.forward(temb, params.weight, params.bias)

        def step() -> None:
            t = temb.detach().requires_grad_()
            w = params.weight.detach().requires_grad_()
            b = params.bias.detach().requires_grad_()
            impl.forward(t, w, b).backward(ones)

        fwd, _ = time_call(forward, device)
        fb, _ = time_call(step, device) if impl.has_backward else (None, None)
        dt = device_time_point(forward, step if impl.has_backward else None, device)
        rows[tokens] = {"event_fwd_us": fwd.median, "event_fwd_bwd_us": fb.median if fb else None,
                        "device_time": dt.model_dump(exclude={"fwd_samples", "fwd_bwd_samples"}),
                        "fwd_samples": len(dt.fwd_samples), "fwd_bwd_samples": len(dt.fwd_bwd_samples or [])}
        print(f"{name:10s} T={tokens:5d}  events fwd {fwd.median:8.1f} µs  device {dt.method:10s} "
              f"{dt.fwd_us:8.1f} µs (n={len(dt.fwd_samples)}, noise {dt.fwd_rel_noise or float('nan'):.2%})  "
              f"| events fwd+bwd {fb.median if fb else float('nan'):8.1f} µs  device "
              f"{dt.fwd_bwd_method or '-':10s} {dt.fwd_bwd_us or float('nan'):8.1f} µs "
              f"(n={len(dt.fwd_bwd_samples or [])}, noise {dt.fwd_bwd_rel_noise or float('nan'):.2%})  "
              f"SM {dt.sm_clock_mhz_before}→{dt.sm_clock_mhz_after} MHz ({dt.sm_clock_source}) "
              f"throttled={dt.throttled}" + (f"  capture_error={dt.capture_error}" if dt.capture_error else ""),
              flush=True)
        torch.cuda.empty_cache()
    return rows


def main() -> int:
    names = sys.argv[1:] or ["diffusers", "bundled"]
    device = torch.device("cuda")
    shape = PRESETS["h3"]
    params = make_params(shape, device)
    out_dir = os.environ.get("OUT") or "device-out"
    os.makedirs(out_dir, exist_ok=True)
    results, failed = {}, False
    for name in names:
        reason = registry.get(name).availability()
        if reason is not None:
            print(f"{name}: unavailable: {reason}")
            continue
        try:
            results[name] = check(name, shape, params, device)
        except Exception:
            traceback.print_exc()
            failed = True
    with open(os.path.join(out_dir, "device_time_check.json"), "w", encoding="utf-8") as f:
        json.dump({"gpu": torch.cuda.get_device_name(), "results": results}, f, indent=1)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
