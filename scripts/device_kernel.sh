#!/usr/bin/env bash
# One GPU-machine call for the bundled kernel: install the carried CUTLASS wheel (only needed if the carried
# prebuilt libraries do not load there), load/build both code paths for sm_90a, then correctness vs FP64,
# bitwise invariance and timing vs cuBLAS in one process. Full logs under $OUT; a short table last.
#
# Carry: .whl (nvidia_cutlass-4.2.0.0 wheel) and .kernel-cache (prebuilt libraries, optional).
#   run: export PYTHONUNBUFFERED=1; bash scripts/device_kernel.sh
set -uo pipefail
export PYTHONUNBUFFERED=1
OUT=${OUT:-$PWD/device-out}; mkdir -p "$OUT"
{
  date -u; nvidia-smi -L; nvidia-smi --query-gpu=clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv
  nvcc --version | tail -2; python3 -c 'import torch; print(torch.__version__, torch.version.cuda)'
} 2>&1 | tee "$OUT/env.txt"
if ls .whl/nvidia_cutlass-*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/nvidia_cutlass-*.whl \
    && export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
export ADALN_BENCH_KERNEL_CACHE=${ADALN_BENCH_KERNEL_CACHE:-$PWD/.kernel-cache}
# A carried library must load here; if not (other system libraries), rebuild into a fresh cache.
if ! python3 - <<'PY' 2>&1 | tee "$OUT/preload.txt"
import ctypes, glob, sys
libs = glob.glob(".kernel-cache/*/libadaln_bundled.so")
print("carried libraries:", libs)
for l in libs:
    ctypes.CDLL(l)
sys.exit(0 if libs else 1)
PY
then
  export ADALN_BENCH_KERNEL_CACHE=/tmp/kcache
  echo "carried libraries unusable: building into $ADALN_BENCH_KERNEL_CACHE" | tee -a "$OUT/env.txt"
fi
t0=$(date +%s)
python3 -m adaln_bench.kernels.bundled.build --arch sm_90a 2>&1 | tee "$OUT/build.txt"
python3 -m adaln_bench.kernels.bundled.build --arch sm_90a --path portable 2>&1 | tee -a "$OUT/build.txt"
echo "build/load step: $(( $(date +%s) - t0 )) s" | tee -a "$OUT/build.txt"
for l in "$ADALN_BENCH_KERNEL_CACHE"/*sm_90a*/libadaln_bundled.so; do
  command -v cuobjdump >/dev/null && echo "$l: $(cuobjdump --dump-sass "$l" | grep -c HGMMA) HGMMA, $(cuobjdump --dump-sass "$l" | grep -c 'HMMA') HMMA SASS lines" | tee -a "$OUT/build.txt"
done
if command -v pytest >/dev/null 2>&1 || python3 -c 'import pytest' 2>/dev/null; then
  timeout 90 python3 -m pytest -q -x -p no:cacheprovider tests/gpu/test_bundled_gpu.py 2>&1 | tee "$OUT/pytest_gpu.txt" | tail -5
fi
timeout 270 python3 scripts/device_kernel.py 2>&1 | tee "$OUT/bench.txt" | grep -v '^\[inv\|^\[acc\|^\[time\|^\[load' | tail -60
echo "rc=$?"
