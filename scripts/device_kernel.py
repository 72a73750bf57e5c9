"""Build check + correctness + bitwise invariance + timing of the bundled kernel on one GPU, in one process.

Run by scripts/device_kernel.sh on the GPU machine. Writes full logs/JSON under $OUT (or ./device-out) and
prints a short table last. Not part of the harness: a kernel developer's bench.
"""
from __future__ import annotations

import json
import os
import statistics
import sys
import time
import traceback

import torch
import torch.nn.functional as F

sys.path.insert(0, os.getcwd())
from adaln_bench.kernels.bundled import build as B  # noqa: E402
from adaln_bench.kernels.bundled import candidate as C  # noqa: E402

OUT = os.environ.get("OUT") or "device-out"
os.makedirs(OUT, exist_ok=True)
# Which library this process tests (one process per library, so a crash in one cannot hide another):
#   python3 scripts/device_kernel.py NAME PATH [DEFINE,DEFINE,...]   e.g.  sm90_narrow sm90 ADALN_FWD_TN=64
LIB_NAME_ARG = sys.argv[1] if len(sys.argv) > 1 else "sm90"
LIB_PATH_ARG = sys.argv[2] if len(sys.argv) > 2 else "sm90"
LIB_DEFINES = tuple(d for d in (sys.argv[3] if len(sys.argv) > 3 else "").split(",") if d)
TAG = LIB_NAME_ARG
LOG = open(os.devnull, "w")
RESULTS: dict = {"started": time.strftime("%Y-%m-%d %H:%M:%S")}
D_FULL, N_FULL = 2688, 96768
TS = (1, 3, 4, 64, 256, 2048)
DEV = torch.device("cuda", 0)


def log(*a):
    s = " ".join(str(x) for x in a)
    print(s, flush=True)
    LOG.write(s + "\n")
    LOG.flush()


def save():
    with open(os.path.join(OUT, f"device_kernel_{TAG}.json"), "w") as f:
        json.dump(RESULTS, f, indent=1, default=str)


def g(seed, salt):
    return torch.Generator(DEV).manual_seed(seed * 1000 + salt)


def inputs(n, d=D_FULL, nout=N_FULL, seed=11):
    temb = torch.randn(n, d, generator=g(seed, 7), device=DEV)
    w = (torch.randn(nout, d, generator=g(1, 8), device=DEV) * d ** -0.5).to(torch.bfloat16)
    b = (torch.randn(nout, generator=g(1, 9), device=DEV) * 0.02).to(torch.bfloat16)
    return temb, w, b


def upstream(n, nout, seed):
    return torch.randn(n, nout, generator=torch.Generator(DEV).manual_seed(seed), device=DEV).to(torch.bfloat16)


def cublas(temb, w, b):
    return F.linear(F.silu(temb).to(w.dtype), w, b)


def run(fn, temb, w, b, dy, grads_wb=True):
    t = temb.detach().clone().requires_grad_(True)
    wl = w.detach().requires_grad_(grads_wb)
    bl = b.detach().requires_grad_(grads_wb)
    y = fn(t, wl, bl)
    y.backward(dy)
    return y.detach(), t.grad, (wl.grad if grads_wb else None), (bl.grad if grads_wb else None)


def rel(x, ref):
    return ((x.double() - ref).abs().max() / ref.abs().max()).item()


# ---------------------------------------------------------------------------------------------------------
def load_libs():
    libs = {}
    for path in [LIB_NAME_ARG]:
        target = B.Target(LIB_PATH_ARG, "sm_90a", 90, LIB_DEFINES)
        t0 = time.perf_counter()
        try:
            lib = B.load(target, log=log)
        except Exception as exc:  # noqa: BLE001
            log(f"[load] {path}: FAILED {type(exc).__name__}: {exc}")
            RESULTS.setdefault("load", {})[path] = f"FAILED {exc}"[:3000]
            continue
        log(f"[load] {path}: {lib.path} ({lib.path_name}; {lib.config}) in {time.perf_counter() - t0:.1f} s "
            f"meta={lib.meta}")
        RESULTS.setdefault("load", {})[path] = {"lib": str(lib.path), "meta": lib.meta}
        libs[path] = lib
    return libs


def accuracy(name, fn):
    out = {}
    for T in TS:
        temb, w, b = inputs(T)
        dy = upstream(T, N_FULL, 9)
        t64 = temb.double().requires_grad_(True)
        w64 = w.double().requires_grad_(True)
        b64 = b.double().requires_grad_(True)
        ref = F.linear(F.silu(t64), w64, b64)
        ref.backward(dy.double())
        row = {}
        for cname, f in (("bundled", fn), ("cublas", cublas)):
            y, gt, gw, gb = run(f, temb, w, b, dy)
            torch.cuda.synchronize()
            row[cname] = {"fwd": rel(y, ref.detach()), "temb": rel(gt, t64.grad), "w": rel(gw, w64.grad),
                          "b": rel(gb, b64.grad),
                          "fwd_bits_equal_cublas": None}
            if cname == "bundled":
                yb = y
            else:
                row["bundled"]["fwd_bits_equal_cublas"] = bool(torch.equal(yb, y))
                row["bundled"]["fwd_frac_equal_cublas"] = (yb == y).float().mean().item()
        out[T] = row
        log(f"[acc {name}] T={T}: " + json.dumps(row))
        del t64, w64, b64, ref
        torch.cuda.empty_cache()
    return out


def invariance(name, fn, rng_seed=3):
    """Bitwise: all rows vs single rows (n = 257 and 2048), random positions/batch sizes, reversed order,
    T-block boundaries; dW/db repeatability."""
    res = {}
    n = 2048
    temb, w, b = inputs(n, seed=rng_seed)
    dy = upstream(n, N_FULL, rng_seed)
    single_y, single_g = [], []
    for i in range(n):
        y, gt, _, _ = run(fn, temb[i:i + 1], w, b, dy[i:i + 1], grads_wb=False)
        single_y.append(y)
        single_g.append(gt)
    single_y = torch.cat(single_y)
    single_g = torch.cat(single_g)
    for m in (257, 2048):
        y, gt, gw, gb = run(fn, temb[:m], w, b, dy[:m])
        fd = (y != single_y[:m]).any(dim=1).sum().item()
        gd = (gt != single_g[:m]).any(dim=1).sum().item()
        y2, gt2, gw2, gb2 = run(fn, temb[:m], w, b, dy[:m])
        rep = bool(torch.equal(gw, gw2) and torch.equal(gb, gb2) and torch.equal(y, y2) and torch.equal(gt, gt2))
        res[f"all_rows_{m}"] = {"fwd_differ": fd, "rowgrad_differ": gd, "rows": m, "repeatable": rep}
        log(f"[inv {name}] all rows n={m}: fwd_differ={fd} rowgrad_differ={gd} repeatable={rep}")
        del gw, gb, gw2, gb2
    # reversed order
    idx = torch.arange(n - 1, -1, -1, device=DEV)
    y, gt, _, _ = run(fn, temb[idx], w, b, dy[idx], grads_wb=False)
    fd = (y != single_y[idx]).any(dim=1).sum().item()
    gd = (gt != single_g[idx]).any(dim=1).sum().item()
    res["reversed_2048"] = {"fwd_differ": fd, "rowgrad_differ": gd}
    log(f"[inv {name}] reversed n=2048: fwd_differ={fd} rowgrad_differ={gd}")
    # batch-size sweep with random filler and positions
    sizes = sorted({*range(1, 10), *[k + e for k in (16, 32, 64, 128, 256, 512, 1024, 2048) for e in (-1, 0, 1)
                                     if k + e <= n], n})
    probes = [0, 259, 515, 771, 1027, 1283, 1539, 2047]
    gen = torch.Generator().manual_seed(rng_seed)
    comps = fails = 0
    first = []
    for m in sizes:
        for r in probes:
            perm = torch.randperm(n, generator=gen)
            filler = perm[perm != r][: m - 1].tolist()
            for p in sorted({0, (m - 1) // 2, m - 1}):
                rows = filler[:p] + [r] + filler[p:]
                ii = torch.tensor(rows, device=DEV)
                y, gt, _, _ = run(fn, temb[ii], w, b, dy[ii], grads_wb=False)
                ok = torch.equal(y[p], single_y[r]) and torch.equal(gt[p], single_g[r])
                comps += 1
                if not ok:
                    fails += 1
                    if len(first) < 8:
                        first.append({"batch": m, "position": p, "row": r,
                                      "fwd": bool(torch.equal(y[p], single_y[r])),
                                      "grad": bool(torch.equal(gt[p], single_g[r]))})
    res["sweep"] = {"comparisons": comps, "differ": fails, "first": first, "sizes": len(sizes)}
    log(f"[inv {name}] sweep: {comps} comparisons, {fails} differ {first}")
    return res, single_y, single_g


def time_fn(fn, temb, w, b, mode, warm=20, reps=100):
    def once():
        if mode == "fwd":
            with torch.no_grad():
                fn(temb, w, b)
        else:
            t = temb.detach().requires_grad_(True)
            wl = w.detach().requires_grad_(True)
            bl = b.detach().requires_grad_(True)
            y = fn(t, wl, bl)
            y.backward(torch.ones_like(y))
    for _ in range(warm):
        once()
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        once()
        e1.record()
        e1.synchronize()
        ts.append(e0.elapsed_time(e1) * 1000.0)
    ts.sort()
    return {"median": statistics.median(ts), "min": ts[0], "q1": ts[len(ts) // 4], "q3": ts[3 * len(ts) // 4],
            "max": ts[-1], "count": len(ts)}


def timing(fns):
    out = {}
    for T in TS:
        temb, w, b = inputs(T)
        out[T] = {}
        for mode in ("fwd", "fwd_bwd"):
            for name, fn in fns.items():
                try:
                    out[T].setdefault(name, {})[mode] = time_fn(fn, temb, w, b, mode)
                except Exception as exc:  # noqa: BLE001
                    out[T].setdefault(name, {})[mode] = {"error": str(exc)[:500]}
        log(f"[time] T={T}: " + json.dumps({k: {m: round(v[m].get("median", -1), 1) for m in v}
                                            for k, v in out[T].items()}))
    return out


def entry_timing(lib, reps=50):
    """Device time of each C entry point alone (buffers preallocated, no torch/autograd around it)."""
    out = {}
    dev = DEV
    for T in TS:
        temb, w, b = inputs(T)
        dy = upstream(T, N_FULL, 9)
        act = torch.empty(T, D_FULL, dtype=torch.bfloat16, device=dev)
        y = torch.empty(T, N_FULL, dtype=torch.bfloat16, device=dev)
        dtemb = torch.empty(T, D_FULL, device=dev)
        dw = torch.empty(N_FULL, D_FULL, dtype=torch.bfloat16, device=dev)
        db = torch.empty(N_FULL, dtype=torch.bfloat16, device=dev)
        nb = lib.dtemb_scratch_bytes(T, D_FULL, N_FULL)
        scratch = torch.empty(nb, dtype=torch.uint8, device=dev)
        st = torch.cuda.current_stream().cuda_stream
        P = lambda x: x.data_ptr() if x is not None else None  # noqa: E731
        calls = {
            "fwd(silu+gemm)": lambda: lib.forward(P(temb), P(w), P(b), P(act), P(y), T, D_FULL, N_FULL, P(scratch),
                                                  lib.gemm_ws_bytes, st),
            "dtemb(gemm+fold)": lambda: lib.backward(P(dy), P(w), P(temb), P(act), P(dtemb), None, None, T, D_FULL,
                                                     N_FULL, P(scratch), nb, st),
            "dW": lambda: lib.backward(P(dy), P(w), P(temb), P(act), None, P(dw), None, T, D_FULL, N_FULL, P(scratch),
                                       nb, st),
            "db": lambda: lib.backward(P(dy), P(w), P(temb), P(act), None, None, P(db), T, D_FULL, N_FULL, P(scratch),
                                       nb, st),
        }
        row = {}
        for k, f in calls.items():
            for _ in range(5):
                f()
            torch.cuda.synchronize()
            ts = []
            for _ in range(reps):
                e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                e0.record()
                f()
                e1.record()
                e1.synchronize()
                ts.append(e0.elapsed_time(e1) * 1000)
            row[k] = round(statistics.median(ts), 1)
        # host time per call of the whole differentiable forward vs the cuBLAS path (no sync in between)
        fn = C.make_forward(lib)
        for name, f in (("host_us_bundled_fwd", fn), ("host_us_cublas_fwd", cublas)):
            with torch.no_grad():
                for _ in range(5):
                    f(temb, w, b)
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                for _ in range(20):
                    f(temb, w, b)
                row[name] = round((time.perf_counter() - t0) / 20 * 1e6, 1)
                torch.cuda.synchronize()
        out[T] = row
        log(f"[entry] T={T}: {row}")
        del dw, scratch
    return out


def kernel_breakdown(fns):
    """Per-kernel device time of one fwd+bwd step (torch.profiler), for the notes' gap-to-floor analysis."""
    from torch.profiler import ProfilerActivity, profile

    out = {}
    for name in [k for k in fns if k != "cublas"] + ["cublas"]:
        for T in (1, 64, 2048):
            temb, w, b = inputs(T)
            fn = fns[name]
            for _ in range(3):
                t = temb.detach().requires_grad_(True)
                y = fn(t, w.detach().requires_grad_(True), b.detach().requires_grad_(True))
                y.backward(torch.ones_like(y))
            torch.cuda.synchronize()
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                for _ in range(5):
                    t = temb.detach().requires_grad_(True)
                    y = fn(t, w.detach().requires_grad_(True), b.detach().requires_grad_(True))
                    y.backward(torch.ones_like(y))
                torch.cuda.synchronize()
            rows = []
            for ev in prof.key_averages():
                dt = getattr(ev, "device_time_total", None) or getattr(ev, "cuda_time_total", 0)
                if dt and ev.count:
                    rows.append((ev.key[:90], ev.count // 5, round(dt / 5, 1)))
            rows.sort(key=lambda r: -r[2])
            out[f"{name} T={T}"] = rows[:12]
            log(f"[prof] {name} T={T}: " + "; ".join(f"{k} x{c}: {t} us" for k, c, t in rows[:8]))
    return out


def main():
    log(f"torch {torch.__version__} cuda {torch.version.cuda} device {torch.cuda.get_device_name(0)} "
        f"cc {torch.cuda.get_device_capability(0)}")
    libs = load_libs()
    save()
    fns = {"cublas": cublas}
    for path, lib in libs.items():
        fns[f"bundled_{path}"] = C.make_forward(lib)
    # the registered candidate as the harness would build it (auto path = sm90 on H200)
    try:
        from adaln_bench.kernels.registry import BuildContext
        impl = C.BUNDLED.build(BuildContext(mode="plain", device=DEV, dim=D_FULL, hidden=5376, modalities=3))
        RESULTS["candidate"] = {"availability": C.availability(), "source": impl.source, "details": impl.details}
        log(f"[candidate] availability={C.availability()} source={impl.source!r}")
    except Exception as exc:  # noqa: BLE001
        RESULTS["candidate"] = {"error": repr(exc)}
        log(f"[candidate] FAILED {exc!r}")
    # quick sanity at small shape before the big things
    for path, lib in libs.items():
        fn = fns[f"bundled_{path}"]
        try:
            temb, w, b = inputs(5, 256, 768)
            y = fn(temb, w, b)
            ref = F.linear(F.silu(temb.double()), w.double(), b.double())
            log(f"[sanity {path}] small fwd rel err {rel(y, ref):.3e}")
        except Exception:  # noqa: BLE001
            log(f"[sanity {path}] FAILED\n{traceback.format_exc()}")
            fns.pop(f"bundled_{path}", None)
    RESULTS["accuracy"] = {}
    RESULTS["invariance"] = {}
    singles = {}
    for name in [k for k in fns if k.startswith("bundled")]:
        try:
            RESULTS["accuracy"][name] = accuracy(name, fns[name])
            save()
            inv, sy, sg = invariance(name, fns[name])
            RESULTS["invariance"][name] = inv
            singles[name] = (sy, sg)
            save()
        except Exception:  # noqa: BLE001
            log(f"[{name}] FAILED\n{traceback.format_exc()}")
            RESULTS["invariance"][name] = {"error": traceback.format_exc()[-3000:]}
    # bits across libraries (tile shapes, instruction shapes) on the same 2048 single-row runs: each process
    # leaves its rows in /tmp and compares with those already there
    import glob
    for name, (sy, sg) in singles.items():
        for other in sorted(glob.glob("/tmp/singles_*.pt")):
            o = torch.load(other)
            cmp = {"fwd_rows_differ": (sy.cpu() != o["y"]).any(1).sum().item(),
                   "dtemb_rows_differ": (sg.cpu() != o["g"]).any(1).sum().item()}
            RESULTS.setdefault("cross_library_bits", {})[f"{name} vs {os.path.basename(other)[8:-3]}"] = cmp
            log(f"[cross-lib] {name} vs {os.path.basename(other)[8:-3]} (2048 single rows): {cmp}")
        torch.save({"y": sy.cpu(), "g": sg.cpu()}, f"/tmp/singles_{name}.pt")
    del singles
    torch.cuda.empty_cache()
    save()
    RESULTS["timing"] = timing(fns)
    save()
    for path, lib in libs.items():
        try:
            RESULTS["entry_timing"] = entry_timing(lib)
        except Exception:  # noqa: BLE001
            log(f"[entry] FAILED\n{traceback.format_exc()}")
    save()
    try:
        RESULTS["profile"] = kernel_breakdown(fns) if os.environ.get("PROFILE") else None
    except Exception:  # noqa: BLE001
        log(f"[prof] FAILED\n{traceback.format_exc()}")
    save()
    # table
    log("\n=== bundled kernel on " + torch.cuda.get_device_name(0) + f" [{TAG}: {', '.join(lib.config for lib in libs.values())}]"
        " (us, median of 100; ratio = bundled/cuBLAS)")
    for name in [k for k in fns if k.startswith("bundled")]:
        log(f"--- {name}")
        log(f"{'T':>5} {'fwd':>8} {'cublas':>8} {'ratio':>6} | {'fwd+bwd':>8} {'cublas':>8} {'ratio':>6}")
        for T in TS:
            r = RESULTS["timing"][T]
            a, c = r[name], r["cublas"]
            f1, f2 = a["fwd"].get("median", float("nan")), c["fwd"]["median"]
            b1, b2 = a["fwd_bwd"].get("median", float("nan")), c["fwd_bwd"]["median"]
            log(f"{T:>5} {f1:8.1f} {f2:8.1f} {f1 / f2:6.2f} | {b1:8.1f} {b2:8.1f} {b1 / b2:6.2f}")
        acc = RESULTS["accuracy"].get(name, {})
        for T, row in acc.items():
            bb, cc = row["bundled"], row["cublas"]
            log(f"  acc T={T}: fwd {bb['fwd']:.2e} (cublas {cc['fwd']:.2e}) temb {bb['temb']:.2e} "
                f"(cublas {cc['temb']:.2e}) w {bb['w']:.2e} ({cc['w']:.2e}) b {bb['b']:.2e} ({cc['b']:.2e})")
        for T, row in (RESULTS.get("entry_timing") or {}).items():
            log(f"  entry T={T}: " + ", ".join(f"{k} {v}" for k, v in row.items()))
        inv = RESULTS["invariance"].get(name, {})
        log("  invariance: " + json.dumps({k: {kk: vv for kk, vv in v.items() if kk != "first"}
                                           for k, v in inv.items() if isinstance(v, dict)}))
    save()


if __name__ == "__main__":
    main()
