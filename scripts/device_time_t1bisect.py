# Thirteenth session: where does the harness's slow T = 1 bundled forward (134.6 µs device time in every report
# since b2b1e01, against 117-123 elsewhere) come from? One fresh process; the bundled candidate built as the harness
# builds it; measure_device_time(forward at T) after each step of the harness's own sequence, with the GPU's
# clocks, memory temperature and throttle reasons (NVML) beside each figure.
import sys, time, torch
import pynvml
from adaln_bench.harness.device_time import measure_device_time
from adaln_bench.harness.inputs import make_params, make_temb
from adaln_bench.harness import plan as P
from adaln_bench.harness.shapes import PRESETS
from adaln_bench.harness.accuracy import measure_accuracy
from adaln_bench.harness.timing import time_call
from adaln_bench.harness.measure import measure_point, measure_candidate, Parts
from adaln_bench.kernels import registry
from adaln_bench.kernels.registry import BuildContext

pynvml.nvmlInit()
h = pynvml.nvmlDeviceGetHandleByIndex(0)


def gpu_state():
    sm = pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM)
    mem = pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_MEM)
    try:  # HBM temperature: NVML field 82 (NVML_FI_DEV_MEMORY_TEMP)
        mt = pynvml.nvmlDeviceGetFieldValues(h, [82])[0].value.uiVal
    except Exception as exc:
        mt = type(exc).__name__
    gt = pynvml.nvmlDeviceGetTemperature(h, pynvml.NVML_TEMPERATURE_GPU)
    try:
        reasons = pynvml.nvmlDeviceGetCurrentClocksEventReasons(h)
    except Exception:
        reasons = pynvml.nvmlDeviceGetCurrentClocksThrottleReasons(h)
    return f"sm={sm} mem={mem} gpuT={gt} memT={mt} reasons=0x{reasons:x}"


dev = torch.device("cuda", 0)
torch.cuda.set_device(0)
shape = PRESETS["h3"]
params = make_params(shape, dev)
impl = registry.get("bundled").build(BuildContext(mode="plain", device=dev, shape=shape))
temb = {T: make_temb(T, shape, P.ACCURACY_SEED, dev) for T in (1, 3, 64)}


def fwd_of(T):
    t = temb[T]

    def forward():
        with torch.no_grad():
            impl.forward(t, params.weight, params.bias)
    return forward


def md(label, T=1):
    r = measure_device_time(fwd_of(T), dev)
    s = r.samples_us
    w = sorted(r.warmup_samples_us[:10])
    wmed = w[len(w) // 2] if w else float("nan")
    print(f"{label:<44} T={T:<3} median {r.median_us:7.1f}  first {s[0]:7.1f}  last {s[-1]:7.1f}  n={len(s)}  "
          f"warm-up {len(r.warmup_samples_us)} dropped, first ten's median {wmed:7.1f}  {gpu_state()}", flush=True)


print("start", gpu_state(), flush=True)
md("1 fresh process")
md("2 again")
md("3 T=3", 3)
md("4 T=1 after T=3")
measure_accuracy(impl, params, shape, dev, 1)
md("5 after measure_accuracy(T=1)")
f = fwd_of(1)
time_call(f, dev)
md("6 after event timing of forward")
time.sleep(2.0)
md("7 after 2 s idle")
md("8 again")
# the whole harness sequence, as its child runs it (probes, then accuracy and latency per T)
res = measure_candidate(impl, params, shape, dev, P.FULL, Parts())
for T, e in res.accuracy_latency.items():
    d = e.device_time
    print(f"harness measure_candidate T={T:<5} device fwd {d.fwd_us:8.1f} first {d.fwd_samples[0]:7.1f}  "
          f"fwd+bwd {d.fwd_bwd_us:8.1f}", flush=True)
print("after harness", gpu_state(), flush=True)
md("9 after the harness's sequence")
md("10 again")
md("11 T=64", 64)
md("12 T=1")
