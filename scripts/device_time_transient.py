# Thirteenth session, call 3: how long is the GPU slow after heavy work, and is it the SM clock? The bundled
# forward at T = 1 replayed (its graph of ~17 calls a sample) for 600 ms right after (A) 3 s of T = 2048 steps,
# (B) 1 s idle, (C) the full plan's probes; each sample's time with its offset from the start, and the SM clock
# as the spin kernel counts it (cycles on the SM over event time) and as NVML reports it, every ~50 ms.
import time, torch, pynvml
from adaln_bench.harness.device_time import GraphSampler, spin_cycles_per_us
from adaln_bench.harness.inputs import make_params, make_temb
from adaln_bench.harness import plan as P
from adaln_bench.harness.shapes import PRESETS
from adaln_bench.harness.workload import Workload
from adaln_bench.harness.probes import probe_batch_invariance
from adaln_bench.kernels import registry
from adaln_bench.kernels.registry import BuildContext

pynvml.nvmlInit()
h = pynvml.nvmlDeviceGetHandleByIndex(0)
dev = torch.device("cuda", 0)
torch.cuda.set_device(0)
shape = PRESETS["h3"]
params = make_params(shape, dev)
impl = registry.get("bundled").build(BuildContext(mode="plain", device=dev, shape=shape))
t1 = make_temb(1, shape, P.ACCURACY_SEED, dev)


def fwd():
    with torch.no_grad():
        impl.forward(t1, params.weight, params.bias)


sampler = GraphSampler(fwd)
big = make_temb(2048, shape, P.ACCURACY_SEED, dev)
ones = torch.ones((2048, shape.out_features), dtype=torch.bfloat16, device=dev)


def heavy(seconds):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        for _ in range(10):
            t = big.detach().requires_grad_()
            w = params.weight.detach().requires_grad_()
            b = params.bias.detach().requires_grad_()
            impl.forward(t, w, b).backward(ones)
        torch.cuda.synchronize()


def watch(label, ms=600):
    t0 = time.monotonic()
    rows = []
    next_clock = 0.0
    while (time.monotonic() - t0) * 1e3 < ms:
        el = (time.monotonic() - t0) * 1e3
        if el >= next_clock:
            spin = spin_cycles_per_us(200_000)
            nv = pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM)
            rows.append(f"  {el:7.1f} ms  clock: spin {spin:7.1f} MHz  nvml {nv}")
            next_clock += 50.0
        s = sampler.take(5)
        rows.append(f"  {(time.monotonic() - t0) * 1e3:7.1f} ms  " + " ".join(f"{x:6.1f}" for x in s))
    print(f"== {label}")
    print("\n".join(rows), flush=True)


watch("baseline (after build and capture)", 200)
heavy(3.0)
watch("A: right after 3 s of T = 2048 steps")
time.sleep(1.0)
watch("B: after 1 s idle", 200)
wl = Workload(impl, params, shape, dev)
probe_batch_invariance(wl, P.FULL, lambda *a, **k: None)
del wl
torch.cuda.synchronize()
watch("C: right after the full plan's probes")
