"""What the harness cannot measure about the bundled kernel: the device time of each C entry point alone, and
whether builds of the library (tile shapes, code paths, experiment defines) give bitwise the same rows.

`adaln-bench run --candidate bundled` measures the kernel as a candidate (probes, accuracy, latency). This
script looks below that, at one library build chosen by name, code path and defines, with the harness's own
inputs (`harness/inputs`), plan (seeds, sizes) and timing (`harness/timing`):

    python3 scripts/device_kernel.py NAME PATH [DEFINE,DEFINE,...] [--arch sm_90a] [--out DIR]
    e.g. python3 scripts/device_kernel.py sm90_narrow sm90 ADALN_FWD_TN=64,ADALN_DACT_TN=64

One process per build (scripts/device_kernel.sh runs them), so that a crash in one cannot hide another.
Everything is written under --out (default $OUT, else ./device-out): device_kernel_<NAME>.json, and
singles_<NAME>.pt, the rows the next build's process compares with. Nothing goes to the system temp dir.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Callable, Optional

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout, not an installed copy
from adaln_bench.harness import plan as P  # noqa: E402
from adaln_bench.harness.inputs import Params, make_params, make_temb, make_upstream  # noqa: E402
from adaln_bench.harness.shapes import PRESETS  # noqa: E402
from adaln_bench.harness.timing import time_call  # noqa: E402
from adaln_bench.harness.workload import Workload  # noqa: E402
from adaln_bench.kernels.registry import Implementation  # noqa: E402
from adaln_bench.shape import Shape  # noqa: E402

ENTRY_WARMUP, ENTRY_SAMPLES = 5, 50
SINGLES_SEED = P.FULL.seeds[0]  # the rows of the all_rows probe's first seed, at its largest size
SINGLES_PREFIX = "singles_"


def log(*parts: object) -> None:
    print(" ".join(str(p) for p in parts), flush=True)


# --- per-entry-point device time ----------------------------------------------------------------------


def entry_points(lib, shape: Shape, params: Params, tokens: int, device: torch.device) -> dict[str, Callable[[], None]]:
    """Each C entry point on preallocated buffers, without torch's autograd around it."""
    d, n = shape.dim, shape.out_features
    temb = make_temb(tokens, shape, P.ACCURACY_SEED, device)
    dy = make_upstream((tokens, n), torch.bfloat16, P.ACCURACY_UPSTREAM_SEED, device)
    act = torch.empty(tokens, d, dtype=torch.bfloat16, device=device)
    y = torch.empty(tokens, n, dtype=torch.bfloat16, device=device)
    dtemb = torch.empty(tokens, d, device=device)
    dw = torch.empty(n, d, dtype=torch.bfloat16, device=device)
    db = torch.empty(n, dtype=torch.bfloat16, device=device)
    scratch_bytes = lib.dtemb_scratch_bytes(tokens, d, n)
    scratch = torch.empty(max(scratch_bytes, lib.gemm_ws_bytes, 1), dtype=torch.uint8, device=device)
    stream = torch.cuda.current_stream().cuda_stream if device.type == "cuda" else None
    w, b = params.weight, params.bias

    def ptr(t: Optional[torch.Tensor]) -> Optional[int]:
        return None if t is None else t.data_ptr()

    def backward(out_dtemb, out_dw, out_db) -> Callable[[], None]:
        return lambda: lib.backward(ptr(dy), ptr(w), ptr(temb), ptr(act), ptr(out_dtemb), ptr(out_dw), ptr(out_db),
                                    tokens, d, n, ptr(scratch), scratch_bytes, device.index or 0, stream)

    return {
        "fwd(silu+gemm)": lambda: lib.forward(ptr(temb), ptr(w), ptr(b), ptr(act), ptr(y), tokens, d, n,
                                              ptr(scratch), lib.gemm_ws_bytes, device.index or 0, stream),
        "dtemb(gemm+fold)": backward(dtemb, None, None),
        "dW": backward(None, dw, None),
        "db": backward(None, None, db),
    }


def entry_timing(lib, shape: Shape, params: Params, device: torch.device,
                 sizes: tuple[int, ...] = P.ACCURACY_SIZES) -> dict[str, dict[str, float]]:
    """Median device time in µs of each entry point at each T (the forward first: dtemb reads its act)."""
    out: dict[str, dict[str, float]] = {}
    for tokens in sizes:
        row = {}
        for name, call in entry_points(lib, shape, params, tokens, device).items():
            dist, _ = time_call(call, device, warmup=ENTRY_WARMUP, samples=ENTRY_SAMPLES)
            row[name] = round(dist.median, 1)
        out[str(tokens)] = row
        log(f"[entry] T={tokens}: {row}")
    return out


# --- bits across builds -------------------------------------------------------------------------------


def single_rows(forward, shape: Shape, params: Params, device: torch.device,
                n: int = P.FULL.all_rows_sizes[-1], seed: int = SINGLES_SEED) -> dict[str, torch.Tensor]:
    """Every row of the seeded batch (seed, n) run alone, as the all_rows probe runs it: outputs and d_temb."""
    run = Workload(Implementation(source="bundled build", has_backward=True, forward=forward), params, shape, device)
    outs, grads = [], []
    for i in range(n):
        single = run(seed, n, [i])
        outs.append(single.out.cpu())
        grads.append(single.d_temb.cpu())
    return {"y": torch.cat(outs), "d_temb": torch.cat(grads)}


def compare_with_other_builds(name: str, rows: dict[str, torch.Tensor], out_dir: Path) -> dict[str, dict[str, int]]:
    """Rows that differ from each other build's saved rows in `out_dir`; then this build's rows are saved there."""
    found = {}
    for other in sorted(out_dir.glob(f"{SINGLES_PREFIX}*.pt")):
        other_name = other.stem[len(SINGLES_PREFIX):]
        if other_name == name:
            continue
        theirs = torch.load(other)
        found[other_name] = {
            "fwd_rows_differ": int((rows["y"] != theirs["y"]).any(dim=1).sum()),
            "dtemb_rows_differ": int((rows["d_temb"] != theirs["d_temb"]).any(dim=1).sum()),
        }
        log(f"[cross-lib] {name} vs {other_name} ({rows['y'].shape[0]} single rows): {found[other_name]}")
    torch.save(rows, out_dir / f"{SINGLES_PREFIX}{name}.pt")
    return found


# --- one build ----------------------------------------------------------------------------------------


def sanity(forward, device: torch.device) -> float:
    """The forward's error against FP64 on a small shape, before the long runs: a broken build stops here."""
    shape = Shape(256, 32, 4)
    params = make_params(shape, device)
    temb = make_temb(5, shape, P.ACCURACY_SEED, device)
    ref = F.linear(F.silu(temb.double()), params.weight.double(), params.bias.double())
    got = forward(temb, params.weight, params.bias)
    return ((got.double() - ref).abs().max() / ref.abs().max()).item()


def measure_build(name: str, lib, forward, shape: Shape, device: torch.device, out_dir: Path) -> dict:
    results: dict = {"library": {"path": str(lib.path), "code_path": lib.path_name, "config": lib.config,
                                 "meta": lib.meta}}
    results["sanity_fwd_rel_err"] = sanity(forward, device)
    log(f"[sanity {name}] small fwd rel err {results['sanity_fwd_rel_err']:.3e}")
    params = make_params(shape, device)
    results["cross_library_bits"] = compare_with_other_builds(name, single_rows(forward, shape, params, device),
                                                              out_dir)
    results["entry_timing_us"] = entry_timing(lib, shape, params, device)
    return results


def summary(name: str, results: dict) -> list[str]:
    lines = [f"=== bundled build {name}: {results['library']['code_path']} ({results['library']['config']})"]
    lines += [f"  entry T={t}: " + ", ".join(f"{k} {v} µs" for k, v in row.items())
              for t, row in results["entry_timing_us"].items()]
    lines += [f"  bits vs {other}: {counts}" for other, counts in results["cross_library_bits"].items()]
    return lines


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("name", help="a name for this build (the file names in --out use it)")
    parser.add_argument("path", help="code path: sm90 or portable")
    parser.add_argument("defines", nargs="?", default="", help="comma-separated experiment defines, e.g. ADALN_FWD_TN=64")
    parser.add_argument("--arch", default="sm_90a")
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT") or "device-out"))
    args = parser.parse_args(argv)

    from adaln_bench.kernels.bundled import build as B
    from adaln_bench.kernels.bundled.candidate import make_forward

    args.out.mkdir(parents=True, exist_ok=True)
    device = torch.device("cuda", 0)
    log(f"torch {torch.__version__} cuda {torch.version.cuda} device {torch.cuda.get_device_name(0)}")
    target = B.target_for_arch(args.path, args.arch, tuple(d for d in args.defines.split(",") if d))
    lib = B.load(target, log=log)
    log(f"[load] {args.name}: {lib.path} ({lib.path_name}; {lib.config})")
    results = measure_build(args.name, lib, make_forward(lib), PRESETS["h3"], device, args.out)
    (args.out / f"device_kernel_{args.name}.json").write_text(json.dumps(results, indent=1, default=str))
    log("\n".join(summary(args.name, results)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
