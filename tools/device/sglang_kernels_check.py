"""On the GPU machine, before the harness: SGLang's two AdaLN kernels, called once each, outside the harness.

    python3 tools/device/sglang_kernels_check.py kernels            # after tools/device/sglang_kernels.sh installed the set
    python3 tools/device/sglang_kernels_check.py summary REPORT_DIR # after the harness wrote its reports there

timestep_sinusoid's JIT kernel: the import, then the first call (SGLang's load_jit: ninja, nvcc, tvm-ffi),
timed; the output against the FP64 formula of docs/spec.md §10.1, and row 5 of a 4097-row batch against the same
row alone. norm_modulate's CuTe DSL kernel: the candidate's availability reason, and the import's own error.
`summary`: from the harness's reports under REPORT_DIR (its --out), one line per operator and candidate.
"""
from __future__ import annotations

import json
import math
import sys
import time
from pathlib import Path


def jit_kernel() -> None:
    import torch

    t0 = time.perf_counter()
    from sglang.kernels.ops.diffusion.modulate import timestep_embedding_jit as module

    imported = time.perf_counter() - t0
    t = torch.rand(4097, generator=torch.Generator("cuda").manual_seed(3001), device="cuda")
    t0 = time.perf_counter()
    y = module.timestep_embedding(t, 256, flip_sin_to_cos=True, downscale_freq_shift=0.0)
    torch.cuda.synchronize()
    first = time.perf_counter() - t0
    freq = torch.exp(-torch.log(torch.tensor(10000.0, dtype=torch.float64)) * torch.arange(128, dtype=torch.float64) / 128)
    e = t.double()[:, None].cpu() * freq[None]
    ref = torch.cat([torch.cos(e), torch.sin(e)], dim=1)
    rel = (y.double().cpu() - ref).norm().item() / ref.norm().item()
    alone = module.timestep_embedding(t[5:6].clone(), 256, flip_sin_to_cos=True, downscale_freq_shift=0.0)
    same = torch.equal(alone[0], y[5])
    print(f"jit: import {imported:.1f} s, first call (compile + load + run) {first:.1f} s, shape {tuple(y.shape)}, "
          f"fwd_rel_err vs FP64 {rel:.3e}, row 5 alone == row 5 of 4097: {same}, module {module.__file__}")


def cute_kernel() -> None:
    from adaln_bench.ops.candidates import candidates_of

    print(f"cutedsl availability: {candidates_of('norm_modulate')['sglang'].availability()}")
    try:
        import sglang.kernels.ops.diffusion.norm.scale_residual_norm_cutedsl  # noqa: F401
        print("cutedsl: the module imported")
    except Exception as exc:  # noqa: BLE001 - the error is what is reported
        print(f"cutedsl import: {type(exc).__name__}: {exc}")


def summary(out: Path) -> None:
    for path in sorted(out.glob("*/*.json")):
        report = json.loads(path.read_text())
        if "results" not in report:
            continue
        for mode, candidates in report["results"].items():
            for name, c in candidates.items():
                if c.get("status") == "unavailable" or "unavailable" in c:
                    print(f"{report['op']:18} {mode:6} {name:10} unavailable: {c.get('unavailable')}")
                    continue
                bi = c.get("batch_invariance") or {}
                rows = {n: (a.get("fwd_rel_err"), a.get("fwd_us"), a.get("fwd_bwd_us")) for n, a in
                        (c.get("accuracy_latency") or {}).items()}
                cells = ", ".join(f"n={n}: err {e:.2e} fwd {f:.1f} us" + (f" fwd+bwd {fb:.1f} us" if fb else "")
                                  for n, (e, f, fb) in rows.items() if e is not None and not math.isnan(e))
                print(f"{report['op']:18} {mode:6} {name:10} invariant={bi.get('batch_invariant')} {cells}")
                print(f"{'':26} source: {c.get('source')}; details: {json.dumps(c.get('details'))}")


if __name__ == "__main__":
    if sys.argv[1:] in (["-h"], ["--help"]):
        print(__doc__)
    elif sys.argv[1:2] == ["summary"] and len(sys.argv) == 3:
        summary(Path(sys.argv[2]))
    elif sys.argv[1:] == ["kernels"]:
        for step in (jit_kernel, cute_kernel):
            try:
                step()
            except Exception as exc:  # noqa: BLE001 - every step reports, the script goes on
                print(f"{step.__name__}: {type(exc).__name__}: {exc}")
    else:
        sys.exit(__doc__)
