"""One-call check of the bundled timestep MLP on a GPU (issue 43): errors against FP64 beside the stock path's,
bitwise row invariance across T and tile configurations (the weight-streaming kernel against the CUTLASS tiles at
every T), repeatable weight gradients, and device time of the kernel, of the kernel forced onto another path and of
the stock path, paired in the same rounds (CUDA-graph replays). Prints a table last; JSON to --json.

Usage: python3 tools/device/timestep_mlp_check.py [--json out.json] [--sizes 1,3,4,64,256,2048] [--rounds 15]
       [--alt "DEF=1;DEF2=1,DEF3=2"]  (experiment builds, prebuilt: bits and times of their streaming path)
       [--fusion 1,3,4]  (the most fusing timestep_sinusoid into the MLP could save, forward, at those T)
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys

import torch
import torch.nn.functional as F

from adaln_bench.kernels.timestep_mlp import ops, timestep_mlp

F_IN, HID, D = 256, 5376, 2688


def params(dev):
    g = torch.Generator(dev).manual_seed(3)
    return [torch.randn(HID, F_IN, generator=g, device=dev) * F_IN ** -0.5,
            torch.randn(HID, generator=g, device=dev) * 0.02,
            torch.randn(D, HID, generator=g, device=dev) * HID ** -0.5,
            torch.randn(D, generator=g, device=dev) * 0.02]


def stock(x, w1, b1, w2, b2):
    return F.linear(F.silu(F.linear(x, w1, b1)), w2, b2)


def run(fn, x, dy, ps):
    leaves = [t.detach().clone().requires_grad_() for t in (x, *ps)]
    y = fn(*leaves)
    return (y.detach(), *torch.autograd.grad(y, leaves, dy))


def rel(a, ref):
    return ((a.double() - ref).abs().max() / ref.abs().max()).item()


NAMES = ("y", "dx", "dw1", "db1", "dw2", "db2")


def accuracy(ps, sizes, dev):
    rows = []
    for t in sizes:
        g = torch.Generator(dev).manual_seed(100 + t)
        x, dy = torch.randn(t, F_IN, generator=g, device=dev), torch.randn(t, D, generator=g, device=dev)
        ref = run(stock, x.double(), dy.double(), [p.double() for p in ps])
        ours, st = run(timestep_mlp, x, dy, ps), run(stock, x, dy, ps)
        for n, o, s, r in zip(NAMES, ours, st, ref):
            eo, es = rel(o, r), rel(s, r)
            bound = min(max(2 * es, 1e-7), 1e-5)
            rows.append({"T": t, "out": n, "ours": eo, "stock": es, "bound": bound, "ok": eo <= bound})
    return rows


def invariance(ps, dev, lib):
    out = {}
    g = torch.Generator(dev).manual_seed(7)
    x, dy = torch.randn(4096, F_IN, generator=g, device=dev), torch.randn(4096, D, generator=g, device=dev)
    full = run(timestep_mlp, x, dy, ps)
    for lo, t in ((0, 1), (7, 3), (100, 4), (33, 7), (64, 64), (300, 257), (0, 2048), (1000, 1024), (2000, 2060)):
        sub = run(timestep_mlp, x[lo:lo + t], dy[lo:lo + t], ps)
        out[f"rows {lo}+{t} of 4096"] = bool(torch.equal(sub[0], full[0][lo:lo + t])
                                             and torch.equal(sub[1], full[1][lo:lo + t]))
    for t in (5, 300, 2048):
        base = run(timestep_mlp, x[:t], dy[:t], ps)
        for c in (0, 1, 2, 3, 4):
            lib.force_config(c)
            got = run(timestep_mlp, x[:t], dy[:t], ps)
            lib.force_config(-1)
            out[f"T={t} config {c}"] = bool(all(torch.equal(a, b) for a, b in zip(got[:2], base[:2])))
        again = run(timestep_mlp, x[:t], dy[:t], ps)
        out[f"T={t} repeat (all grads)"] = bool(all(torch.equal(a, b) for a, b in zip(again, base)))
    return out


SAME_T = (1, 3, 4, 8, 16, 32, 64, 257, 2048)


def stream_vs_cutlass(ps, dev, lib, sizes=SAME_T):
    """Every output of the weight-streaming path (config 4) against the CUTLASS tiles (config 0 and by T)."""
    out = {}
    for t in sizes:
        g = torch.Generator(dev).manual_seed(500 + t)
        x, dy = torch.randn(t, F_IN, generator=g, device=dev), torch.randn(t, D, generator=g, device=dev)
        got = {}
        for c in (4, 0, 1):
            old = lib.force_config(c)
            got[c] = run(timestep_mlp, x, dy, ps)
            lib.force_config(old)
        for c in (0, 1):
            out[f"T={t} stream vs config {c}"] = [n for n, a, b in zip(NAMES, got[4], got[c]) if not torch.equal(a, b)]
    return out


def forced(lib, config, fn):
    """fn run with the row GEMMs forced to one configuration (a graph captured inside keeps it)."""
    def f():
        old = lib.force_config(config)
        try:
            fn()
        finally:
            lib.force_config(old)
    return f


def graph_of(fn, calls):
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(2):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(calls):
            fn()
    return g


def paired_rounds(graphs, rounds, calls):
    """µs per call of each graph (of `calls` calls), all graphs once a round in the same order, `rounds` rounds."""
    times = {n: [] for n in graphs}
    for _ in range(rounds):
        for n, gr in graphs.items():
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            gr.replay()
            b.record()
            b.synchronize()
            times[n].append(a.elapsed_time(b) * 1000 / calls)
    return times


def timing(ps, sizes, dev, rounds, lib):
    rows = []
    for t in sizes:
        calls = 20 if t <= 256 else 4
        g = torch.Generator(dev).manual_seed(200 + t)
        x, dy = torch.randn(t, F_IN, generator=g, device=dev), torch.randn(t, D, generator=g, device=dev)
        leaves = {n: [t_.detach().clone().requires_grad_() for t_ in (x, *ps)] for n in ("ours", "stock")}
        fns = {"ours": timestep_mlp, "stock": stock}
        # the path not taken at this T: the CUTLASS small tile below the streaming limit, the stream above it
        other = 0 if lib.config_for(t) == 4 else (4 if t <= 128 else None)
        if other is not None:
            fns["other"] = timestep_mlp
            leaves["other"] = [t_.detach().clone().requires_grad_() for t_ in (x, *ps)]

        def fwd(n):
            def f():
                with torch.no_grad():
                    fns[n](*leaves[n])
            return forced(lib, other, f) if n == "other" else f

        def step(n):
            def f():
                y = fns[n](*leaves[n])
                torch.autograd.grad(y, leaves[n], dy)
            return forced(lib, other, f) if n == "other" else f

        row = {"T": t}
        for kind, make in (("fwd", fwd), ("fwd_bwd", step)):
            graphs = {n: graph_of(make(n), calls) for n in fns}
            times = paired_rounds(graphs, rounds, calls)
            ratios = [o / s for o, s in zip(times["ours"], times["stock"])]
            row[kind] = {"ours_us": statistics.median(times["ours"]), "stock_us": statistics.median(times["stock"]),
                         "ratio": statistics.median(ratios)}
            if other is not None:
                row[kind]["other_config"] = other
                row[kind]["other_us"] = statistics.median(times["other"])
                row[kind]["other_ratio"] = statistics.median(o / s for o, s in zip(times["other"], times["stock"]))
            del graphs
        rows.append(row)
        torch.cuda.empty_cache()
    return rows


def fusion(ps, sizes, dev, rounds):
    """What fusing timestep_sinusoid into this MLP could save at most (issue 43's note): device time of the MLP's
    forward from a ready embedding, and of the sinusoid's stock path followed by it, paired in the same rounds.
    A fused kernel would make the embedding inside the first product's operand load, so the difference (the
    sinusoid's kernels and the embedding's round trip through memory) is the most it could win. Forward only:
    no gradient flows into the timesteps, so the backward is the same with or without it."""
    from adaln_bench.ops.timestep_sinusoid import replay

    rows = []
    for t in sizes:
        calls = 20
        steps = torch.rand(t, device=dev, generator=torch.Generator(dev).manual_seed(300 + t)) * 1000
        emb = replay(steps, F_IN)

        def mlp_only():
            with torch.no_grad():
                timestep_mlp(emb, *ps)

        def both():
            with torch.no_grad():
                timestep_mlp(replay(steps, F_IN), *ps)

        def sinusoid_only():
            replay(steps, F_IN)

        fns = {"mlp": mlp_only, "sinusoid+mlp": both, "sinusoid": sinusoid_only}
        graphs = {n: graph_of(f, calls) for n, f in fns.items()}
        times = paired_rounds(graphs, rounds, calls)
        med = {n: statistics.median(v) for n, v in times.items()}
        saved = [b_ - m for b_, m in zip(times["sinusoid+mlp"], times["mlp"])]
        rows.append({"T": t, **{f"{n}_us": v for n, v in med.items()}, "most_saved_us": statistics.median(saved),
                     "most_saved_fraction": statistics.median(s_ / b_ for s_, b_ in zip(saved, times["sinusoid+mlp"]))})
        del graphs
    return rows


def print_fusion(rows):
    for r in rows:
        print(f"fusion T={r['T']}: sinusoid {r['sinusoid_us']:.1f} us, MLP fwd {r['mlp_us']:.1f} us, both "
              f"{r['sinusoid+mlp_us']:.1f} us: fusing saves at most {r['most_saved_us']:.1f} us "
              f"({100 * r['most_saved_fraction']:.0f} %)")


def short(name: str) -> str:
    """A kernel's name without its template arguments; a CUTLASS GEMM by its tiles and operand layouts (tn: both
    crosswise, the forward; nn: A congruous, the backward's row GEMMs; nt: both congruous, the weight gradients)."""
    if "cutlass" in name:
        shapes = [seg.split(">")[0] for seg in name.split("GemmShape<")[1:3]]
        marks = [("Cg" if name.startswith("Congruous", i) else "Cw") for i in range(len(name))
                 if name.startswith("Congruous", i) or name.startswith("Crosswise", i)][:2]
        layout = {"Cw/Cw": "tn", "Cg/Cw": "nn", "Cg/Cg": "nt"}.get("/".join(marks), "/".join(marks))
        return f"gemm {layout} {'/'.join(shapes)}"
    return name.split("(")[0].split("<")[0][:60]


def profile(ps, sizes, dev):
    """Device time of each kernel in one fwd+bwd step (5 steps profiled, per-step mean), ours and the stock path."""
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as prof

    out = {}
    for t in sizes:
        g = torch.Generator(dev).manual_seed(300 + t)
        x, dy = torch.randn(t, F_IN, generator=g, device=dev), torch.randn(t, D, generator=g, device=dev)
        for name, fn in (("ours", timestep_mlp), ("stock", stock)):
            for _ in range(2):
                run(fn, x, dy, ps)
            torch.cuda.synchronize()
            with prof(activities=[ProfilerActivity.CUDA]) as pr:
                for _ in range(5):
                    run(fn, x, dy, ps)
                torch.cuda.synchronize()
            rows = {}
            for e in pr.key_averages():
                us = getattr(e, "self_device_time_total", None) or getattr(e, "self_cuda_time_total", 0)
                if us:
                    k = short(e.key)
                    rows[k] = rows.get(k, 0.0) + us / 5
            out[f"{name} T={t}"] = dict(sorted(rows.items(), key=lambda kv: -kv[1]))
    return out


def variants(ps, sizes, dev, lib, rounds):
    """The large-T tile variants at T > 128: bits against variant 0 and paired device time."""
    rows = []
    for t in sizes:
        g = torch.Generator(dev).manual_seed(400 + t)
        x, dy = torch.randn(t, F_IN, generator=g, device=dev), torch.randn(t, D, generator=g, device=dev)
        base = run(timestep_mlp, x, dy, ps)
        leaves = [v.detach().clone().requires_grad_() for v in (x, *ps)]

        def step():
            y = timestep_mlp(*leaves)
            torch.autograd.grad(y, leaves, dy)

        def fwd():
            with torch.no_grad():
                timestep_mlp(*leaves)

        for v in (0, 1, 2):
            lib.set_large_variant(v)
            got = run(timestep_mlp, x, dy, ps)
            same = all(torch.equal(a, b) for a, b in zip(got, base))
            res = {"T": t, "variant": v, "same_bits": bool(same)}
            for kind, fn in (("fwd", fwd), ("fwd_bwd", step)):
                res[kind] = statistics.median(paired_rounds({kind: graph_of(fn, 3)}, rounds, 3)[kind])
            rows.append(res)
        lib.set_large_variant(0)
    return rows


def alternates(ps, dev, specs, rounds):
    """Experiment builds (each a set of defines, prebuilt and carried): their streaming path's bits against their
    CUTLASS tiles, and paired times at T = 1 and 4."""
    from adaln_bench.kernels.timestep_mlp import build

    base_lib, base = ops.library(dev), ops.target_for_device(dev)
    rows = []
    for spec in specs:
        lib = build.load(build.Target(base.arch, base.cc, tuple(spec.split(","))))
        ops._BY_INDEX[dev.index] = lib
        try:
            rows.append({"defines": spec, "differ": stream_vs_cutlass(ps, dev, lib, (1, 5, 64)),
                         "timing": timing(ps, [1, 4], dev, rounds, lib)})
        finally:
            ops._BY_INDEX[dev.index] = base_lib
    return rows


def print_timing(rows):
    print(f"{'T':>5} {'fwd us':>8} {'stock':>8} {'ratio':>6} {'other':>10} | {'step us':>8} {'stock':>8} {'ratio':>6} "
          f"{'other':>10}")
    for r in rows:
        cells = []
        for k in ("fwd", "fwd_bwd"):
            a = r[k]
            o = f"c{a['other_config']} {a['other_ratio']:.3f}" if "other_us" in a else "-"
            cells.append(f"{a['ours_us']:8.1f} {a['stock_us']:8.1f} {a['ratio']:6.3f} {o:>10}")
        print(f"{r['T']:5} " + " | ".join(cells))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json", default=None)
    p.add_argument("--sizes", default="1,3,4,64,256,2048")
    p.add_argument("--rounds", type=int, default=15)
    p.add_argument("--defines", default="", help="load the experiment library built with these defines (a,b)")
    p.add_argument("--alt", default="", help="experiment builds to compare, ';' between builds, ',' between defines")
    p.add_argument("--no-variants", action="store_true", help="skip the large-T tile variants")
    p.add_argument("--fusion", default="", help="T values (a,b) at which to time the sinusoid before the MLP and "
                   "the MLP alone: the most fusing the two could save")
    p.add_argument("--fusion-only", action="store_true", help="with --fusion: time that and nothing else")
    args = p.parse_args(argv)
    torch.backends.cuda.matmul.allow_tf32 = False
    dev = torch.device("cuda", 0)
    sizes = [int(s) for s in args.sizes.split(",")]
    if args.defines:
        from adaln_bench.kernels.timestep_mlp import build

        base = ops.target_for_device(dev)
        ops._BY_INDEX[dev.index] = build.load(build.Target(base.arch, base.cc, tuple(args.defines.split(","))))
    lib = ops.library(dev)
    ps = params(dev)
    if args.fusion_only:
        rows = fusion(ps, [int(v) for v in args.fusion.split(",") if v], dev, args.rounds)
        if args.json:
            with open(args.json, "w") as fh:
                json.dump({"library": str(lib.path), "fusion": rows}, fh, indent=1)
        print_fusion(rows)
        return 0
    result = {"library": str(lib.path), "defines": args.defines, "splits": lib.splits(F_IN, HID, D)}
    result["accuracy"] = accuracy(ps, sizes, dev)
    print("accuracy done", flush=True)
    result["invariance"] = invariance(ps, dev, lib)
    result["stream_vs_cutlass"] = stream_vs_cutlass(ps, dev, lib)
    print("invariance done", flush=True)
    result["timing"] = timing(ps, sizes, dev, args.rounds, lib)
    print("timing done", flush=True)
    result["profile"] = profile(ps, [1, 4, 32, 64, 2048], dev)
    result["variants"] = [] if args.no_variants else variants(ps, [256, 2048], dev, lib, 10)
    result["alternates"] = alternates(ps, dev, [a for a in args.alt.split(";") if a], args.rounds)
    fused_sizes = [int(v) for v in args.fusion.split(",") if v]
    result["fusion"] = fusion(ps, fused_sizes, dev, args.rounds) if fused_sizes else []
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(result, fh, indent=1)
    bad = [r for r in result["accuracy"] if not r["ok"]]
    for key, rows in result["profile"].items():
        print(f"-- {key}: " + "; ".join(f"{k} {v:.1f}" for k, v in list(rows.items())[:9]))
    for r in result["variants"]:
        print(f"variant T={r['T']} v{r['variant']}: fwd {r['fwd']:.1f} us, fwd+bwd {r['fwd_bwd']:.1f} us, "
              f"same bits {r['same_bits']}")
    print(f"{'T':>5} {'out':4} {'ours':>9} {'stock':>9} {'bound':>9} ok")
    for r in result["accuracy"]:
        print(f"{r['T']:5} {r['out']:4} {r['ours']:9.2e} {r['stock']:9.2e} {r['bound']:9.2e} {r['ok']}")
    for r in result["alternates"]:
        diff = {k: v for k, v in r["differ"].items() if v}
        print(f"alt {r['defines']}: " + ("stream bits = CUTLASS" if not diff else f"DIFFER {diff}"))
        print_timing(r["timing"])
    print_fusion(result["fusion"])
    print("invariance:", "ALL OK" if all(result["invariance"].values()) else
          "FAIL " + ", ".join(k for k, v in result["invariance"].items() if not v))
    differ = {k: v for k, v in result["stream_vs_cutlass"].items() if v}
    print("stream vs CUTLASS:", "ALL SAME BITS" if not differ else f"DIFFER {differ}")
    print_timing(result["timing"])
    same = all(r["same_bits"] for r in result["variants"])
    return 1 if bad or not same or differ or not all(result["invariance"].values()) else 0


if __name__ == "__main__":
    sys.exit(main())
