#!/usr/bin/env bash
# One device call for a committed report: the carried wheels, a quick GPU smoke run, then the full-shape run.
# Usage (on the GPU machine, from the repo root): ADALN_BENCH_COMMIT=<sha> bash scripts/device_report.sh [run options…]
# Carry: .carry (wheels under .carry/whl, a prebuilt kernel cache under .carry/kernel-cache).
set -uo pipefail
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .carry/whl/*.whl \
  > "$OUT/pip.log" 2>&1 || { cat "$OUT/pip.log"; exit 1; }
export PYTHONPATH=/tmp/site:$PWD
if [ -d .carry/kernel-cache ]; then
  mkdir -p /tmp/kernel-cache && cp -r .carry/kernel-cache/. /tmp/kernel-cache/
  export ADALN_BENCH_KERNEL_CACHE=/tmp/kernel-cache
fi
if [ -d /tmp/site/cutlass_library/source/include ]; then
  export ADALN_BENCH_CUTLASS_INCLUDE=/tmp/site/cutlass_library/source/include
fi
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv | tee "$OUT/nvidia-smi.txt"
python3 -m adaln_bench env --device cuda > "$OUT/env.json" 2>&1 || { cat "$OUT/env.json"; exit 1; }
python3 -m adaln_bench candidates 2>&1 | tee "$OUT/candidates.txt"
echo "== smoke: tiny shape, quick, plain"
python3 -m adaln_bench run --device cuda --preset tiny --quick --mode plain --quiet --out "$OUT/smoke.json" \
  > "$OUT/smoke.log" 2>&1 || { cat "$OUT/smoke.log"; exit 1; }
echo "== full run: $*"
start=$(date +%s)
python3 -m adaln_bench run --device cuda --out "$OUT/report.json" "$@" > "$OUT/run.log" 2>&1
rc=$?
echo "run exit $rc after $(( $(date +%s) - start )) s"
tail -c 3000 "$OUT/run.log"
if [ -n "${GPU_TESTS:-}" ]; then
  echo "== GPU tests"
  timeout "${GPU_TESTS_TIMEOUT:-180}" python3 -m pytest -q -m gpu tests/gpu > "$OUT/gpu-tests.log" 2>&1
  echo "gpu tests exit $?"; tail -n 15 "$OUT/gpu-tests.log"
fi
[ -f "$OUT/report.json" ] && python3 -m adaln_bench report "$OUT/report.json" --markdown
exit $rc
