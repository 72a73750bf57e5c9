#!/usr/bin/env bash
# One device call for the bundled kernel's cold-start cases (tests/gpu/test_cold_start_gpu.py): build both code
# paths of this tree and, when .carry/old-<rev>.tar.gz is carried, of that older tree; run the cases against
# the older tree (to show the failure it had) and then this tree's whole GPU test suite.
# Carry: .carry (whl/nvidia_cutlass-*.whl; optional old-<rev>.tar.gz = `git archive <rev> adaln_bench | gzip`).
set -uo pipefail
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .carry/whl/nvidia_cutlass-*.whl \
  > "$OUT/pip.log" 2>&1 || { cat "$OUT/pip.log"; exit 1; }
export ADALN_BENCH_CUTLASS_INCLUDE=/tmp/site/cutlass_library/source/include
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader | tee "$OUT/gpu.txt"
build() {  # tree cache path
  (cd "$1" && ADALN_BENCH_KERNEL_CACHE=$2 PYTHONPATH=$1 python3 -m adaln_bench.kernels.bundled.build --arch sm_90a --path "$3") \
    > "$OUT/build-$(basename "$2")-$3.log" 2>&1 || echo "BUILD FAILED: $1 $3"
}
old=$(ls .carry/old-*.tar.gz 2>/dev/null | head -1)
t0=$(date +%s)
if [ -n "$old" ]; then
  mkdir -p /tmp/old && tar -xzf "$old" -C /tmp/old
  build /tmp/old /tmp/kc-old sm90 & build /tmp/old /tmp/kc-old portable &
fi
build "$PWD" /tmp/kc-new sm90 & build "$PWD" /tmp/kc-new portable &
wait
echo "builds: $(( $(date +%s) - t0 )) s"
if [ -n "$old" ]; then
  echo "== cold-start cases against $(basename "$old") (expected to fail before the fix)"
  ADALN_BENCH_UNDER_TEST=/tmp/old ADALN_BENCH_KERNEL_CACHE=/tmp/kc-old timeout 400 \
    python3 -m pytest -q -p no:cacheprovider tests/gpu/test_cold_start_gpu.py > "$OUT/cold_start_old.log" 2>&1
  echo "old tree: pytest exit $?"; grep -E "passed|failed" "$OUT/cold_start_old.log" | tail -1
  grep -E "^FAILED" "$OUT/cold_start_old.log" | cut -c1-160
fi
echo "== this tree: every GPU test"
ADALN_BENCH_KERNEL_CACHE=/tmp/kc-new timeout 600 python3 -m pytest -v -p no:cacheprovider tests/gpu \
  > "$OUT/gpu_tests_new.log" 2>&1
echo "this tree: pytest exit $?"
grep -E "PASSED|FAILED|ERROR|SKIPPED" "$OUT/gpu_tests_new.log" | sed 's/ *\[.*%\]//' | cut -c1-150 | tail -40
tail -1 "$OUT/gpu_tests_new.log"
