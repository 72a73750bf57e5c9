#!/usr/bin/env bash
# One GPU-machine call for the bundled kernel: install the carried CUTLASS wheel, load (or build) both code
# paths for sm_90a, the GPU pytest file, then per build in its own process (scripts/device_kernel.py): the
# device time of each C entry point and bitwise comparisons of single rows across builds. The kernel as a
# candidate (probes, accuracy, latency against cuBLAS) is measured by `adaln-bench run --candidate bundled`
# (scripts/device_report.sh). Full logs under $OUT; short tables last.
#
# Carry: .whl (nvidia_cutlass-4.2.0.0 wheel) and .kernel-cache (prebuilt libraries, optional).
#   run: export PYTHONUNBUFFERED=1; bash scripts/device_kernel.sh
set -uo pipefail
export PYTHONUNBUFFERED=1
OUT=${OUT:-$PWD/device-out}; mkdir -p "$OUT"
S="$OUT/setup.txt"
{
  date -u; nvidia-smi -L; nvidia-smi --query-gpu=clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv
  nvcc --version | tail -2; python3 -c 'import torch; print(torch.__version__, torch.version.cuda)'
} 2>&1 | tee "$S"
if ls .whl/nvidia_cutlass-*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/nvidia_cutlass-*.whl \
    && export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
export ADALN_BENCH_KERNEL_CACHE=${ADALN_BENCH_KERNEL_CACHE:-$PWD/.kernel-cache}
# A carried library must load here; if not (other system libraries), rebuild into a fresh cache.
if ! python3 - <<'PY' 2>&1 | tee -a "$S"
import ctypes, glob, os, sys
libs = glob.glob(os.environ["ADALN_BENCH_KERNEL_CACHE"] + "/*/libadaln_bundled.so")
print("carried libraries:", libs)
for l in libs:
    ctypes.CDLL(l)
sys.exit(0 if libs else 1)
PY
then
  export ADALN_BENCH_KERNEL_CACHE=/tmp/kcache
  echo "carried libraries unusable: building into $ADALN_BENCH_KERNEL_CACHE" | tee -a "$S"
fi
# Libraries to test: NAME:PATH:DEFINES (DEFINES empty = the shipped recipe; others are experiment variants).
# Run 2's three libraries, in today's terms (see NOTES.md): v1 = sm90_v1:sm90:ADALN_SMALL_T_MAX=0,ADALN_DW_TN=128
# narrow = sm90_narrow:sm90:ADALN_SMALL_T_MAX=0,ADALN_FWD_TN=64,ADALN_DACT_TN=64   dispatch = sm90:sm90: (shipped)
VARIANTS=${VARIANTS:-"sm90:sm90: portable:portable:"}
t0=$(date +%s)
for v in $VARIANTS; do
  IFS=: read -r name path defs <<< "$v"
  python3 -m adaln_bench.kernels.bundled.build --arch sm_90a --path "$path" ${defs:+$(printf -- '--define %s ' ${defs//,/ })} 2>&1 | tee -a "$S"
done
echo "build/load step: $(( $(date +%s) - t0 )) s" | tee -a "$S"
for l in "$ADALN_BENCH_KERNEL_CACHE"/*sm_90a*/libadaln_bundled.so; do
  command -v cuobjdump >/dev/null && echo "$l: $(cuobjdump --dump-sass "$l" | grep -c HGMMA) HGMMA, $(cuobjdump --dump-sass "$l" | grep -c HMMA) HMMA SASS lines" | tee -a "$S"
done
timeout 60 python3 -m pytest -q -x -p no:cacheprovider tests/gpu/test_bundled_gpu.py 2>&1 | tee "$OUT/pytest_gpu.txt" | tail -4
for v in $VARIANTS; do
  IFS=: read -r name path defs <<< "$v"
  timeout 80 python3 scripts/device_kernel.py "$name" "$path" "$defs" --out "$OUT" > "$OUT/bench_$name.txt" 2>&1
  echo "bench $name rc=$?"
done
grep -h '^\[sanity\|^\[cross\|FAILED\|Error' "$OUT"/bench_*.txt | cut -c1-300 | tail -20
for v in $VARIANTS; do
  IFS=: read -r name path defs <<< "$v"
  sed -n '/^=== bundled/,$p' "$OUT/bench_$name.txt"
done
