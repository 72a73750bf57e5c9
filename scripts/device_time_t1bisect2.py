# Thirteenth session, call 2: call 1 reproduced the slow T = 1 forward inside measure_candidate (134.4 µs) while
# measure_device_time on a closure of our own, before and after, read 117. Here device_time_point (what
# measure_point calls after its event timing) is wrapped: at each T it also times a closure made on the spot, and
# takes the kernel timeline (profile_step.timeline) of both closures' graphs, to see which kernel is slower.
import sys, torch
sys.path.insert(0, "scripts")
from profile_step import timeline
import adaln_bench.harness.measure as M
from adaln_bench.harness.device_time import measure_device_time
from adaln_bench.harness.inputs import make_params, make_temb
from adaln_bench.harness import plan as P
from adaln_bench.harness.shapes import PRESETS
from adaln_bench.kernels import registry
from adaln_bench.kernels.registry import BuildContext

dev = torch.device("cuda", 0)
torch.cuda.set_device(0)
shape = PRESETS["h3"]
params = make_params(shape, dev)
impl = registry.get("bundled").build(BuildContext(mode="plain", device=dev, shape=shape))
original = M.device_time_point
calls = {"n": 0}


def show(label, fn):
    rows = timeline(fn, 6)
    total = sum(d + g for _, d, g in rows)
    per = {}
    for name, d, g in rows:
        key = name[:60]
        a = per.setdefault(key, [0, 0.0, 0.0])
        a[0] += 1; a[1] += d; a[2] += g
    print(f"  {label}: {len(rows)} kernels a replay, {total:.1f} µs a replay")
    for key, (k, d, g) in per.items():
        print(f"     {k:<60} x{k:<3} mean {d / k:7.2f} µs  gap {g / k:6.2f}")


def wrapped(forward, step, device, *a, **kw):
    calls["n"] += 1
    T = forward.__closure__ and [c.cell_contents for c in forward.__closure__ if isinstance(c.cell_contents, torch.Tensor)]
    temb_h = T[0] if T else None
    tokens = temb_h.shape[0] if temb_h is not None else -1
    if tokens in (1, 3):
        mine_t = make_temb(tokens, shape, P.ACCURACY_SEED, dev)

        def mine():
            with torch.no_grad():
                impl.forward(mine_t, params.weight, params.bias)
        print(f"T={tokens}: harness temb ptr%1024={temb_h.data_ptr() % 1024} mine ptr%1024={mine_t.data_ptr() % 1024} "
              f"equal={torch.equal(temb_h, mine_t)}", flush=True)
        for label, fn in (("harness closure", forward), ("own closure", mine), ("harness closure", forward)):
            r = measure_device_time(fn, dev)
            print(f"  md {label:<16} median {r.median_us:7.1f} first {r.samples_us[0]:7.1f}", flush=True)
        show("harness closure", forward)
        show("own closure", mine)
    out = original(forward, step, device, *a, **kw)
    print(f"T={tokens}: device_time_point fwd {out.fwd_us:.1f} fwd+bwd {out.fwd_bwd_us:.1f}", flush=True)
    return out


M.device_time_point = wrapped
print("== measure_point(T=1), no probes before", flush=True)
M.measure_point(impl, params, shape, dev, 1, M.Parts(), M.contextlib.nullcontext)
print("== measure_candidate, the quick plan's probes and sizes", flush=True)
M.measure_candidate(impl, params, shape, dev, P.QUICK, M.Parts())
print("== measure_candidate, the full plan", flush=True)
M.measure_candidate(impl, params, shape, dev, P.FULL, M.Parts())
