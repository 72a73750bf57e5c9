#!/usr/bin/env bash
# One device call for the bundled kernel: the carried wheels and prebuilt libraries, then
# `adaln-bench kernel-bench` with the given options (output under $OUT), optionally the bundled kernel's GPU
# tests (cold start included) on the shipped build. Logs end up packed in $OUT/logs.tgz.
# Usage (on the GPU machine, from the repo root): bash tools/device/kernel_bench.sh [kernel-bench options…]
#   WHEELS=dir (default .carry/whl): wheels to install into /tmp/site first (pydantic, nvidia-cutlass)
#   .carry/kernel-cache, when carried: prebuilt libraries (else they are built there, from CUTLASS's wheel)
#   GPU_TESTS=1: pytest tests/gpu/test_bundled_gpu.py and tests/gpu/test_cold_start_gpu.py afterwards, then
#     tests/gpu/test_bundled_gpu.py again with the portable path forced (ADALN_BENCH_BUNDLED_PATH=portable);
#     GPU_TESTS_FILTER=expr: only the tests pytest -k expr selects
#   ADALN_BENCH_COMMIT / ADALN_BENCH_DIRTY: the commit to record (the copy there may have no usable .git)
case "${1:-}" in -h | --help) awk 'NR == 1 && /^#!/ { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "$0"; exit 0 ;; esac
set -uo pipefail
source "$(dirname "$0")/setup.sh"
start=$(date +%s)
python3 -m adaln_bench kernel-bench --out "$OUT" "$@" > "$OUT/kernel_bench.stdout" 2> "$OUT/kernel_bench.stderr"
rc=$?
echo "kernel-bench exit $rc after $(( $(date +%s) - start )) s"
tail -n 4 "$OUT/kernel_bench.stderr"
if [ -n "${GPU_TESTS:-}" ]; then
  # The sm90 set (bundled + cold start) took 163-245 s on the H200 in the ninth session: 360 s leaves room.
  filter=(); [ -n "${GPU_TESTS_FILTER:-}" ] && filter=(-k "$GPU_TESTS_FILTER")
  timeout "${GPU_TESTS_TIMEOUT:-360}" python3 -m pytest -q -m gpu "${filter[@]}" tests/gpu/test_bundled_gpu.py tests/gpu/test_cold_start_gpu.py \
    > "$OUT/gpu-tests.log" 2>&1
  echo "gpu tests exit $?"; tail -n 5 "$OUT/gpu-tests.log"
  ADALN_BENCH_BUNDLED_PATH=portable timeout "${GPU_TESTS_TIMEOUT:-360}" python3 -m pytest -q -m gpu "${filter[@]}" \
    tests/gpu/test_bundled_gpu.py > "$OUT/gpu-tests.portable.log" 2>&1
  echo "gpu tests (portable path) exit $?"; tail -n 3 "$OUT/gpu-tests.portable.log"
fi
cat "$OUT/kernel_bench.stdout"
# The device tool brings back at most 8 files: keep the JSON and Markdown, pack every log into logs.tgz.
( cd "$OUT" && find . -maxdepth 1 -type f ! -name '*.json' ! -name '*.md' ! -name logs.tgz -printf '%f\n' > /tmp/kb_logs \
  && tar czf logs.tgz -T /tmp/kb_logs && xargs rm -f < /tmp/kb_logs )
exit $rc
