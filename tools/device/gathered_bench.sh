#!/usr/bin/env bash
# One device call for the gathered operators (issue 32): the carried wheels and the prebuilt gathered library
# (setup.sh: .carry/whl, .carry/kernel-cache), then `adaln-bench kernel-bench --op` for the four gathered
# operators against their stock paths (3 timed processes and one that checks bits and errors, S = 4097, 32768,
# 131072), output under $OUT, logs packed into $OUT/logs.tgz (the device tool brings back at most 8 files).
# Usage (on the GPU machine, from the repo root): bash tools/device/gathered_bench.sh [kernel-bench options…]
#   extra options are added to the default ones (e.g. --name kb_gathered, --processes 5, --sizes 4097,32768)
#   GPU_TESTS=1: pytest tests/gpu/test_gathered_gpu.py afterwards (GPU_TESTS_FILTER=expr: only what -k expr selects;
#     GPU_TESTS_TIMEOUT seconds, default 200)
#   KB_TIMEOUT: seconds for the whole kernel-bench (default 500); ADALN_BENCH_COMMIT / ADALN_BENCH_DIRTY: the
#     commit to record (the copy there may have no usable .git)
case "${1:-}" in -h | --help) awk 'NR == 1 && /^#!/ { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "$0"; exit 0 ;; esac
set -uo pipefail
source "$(dirname "$0")/setup.sh"
kb_start=$(date +%s)
timeout "${KB_TIMEOUT:-500}" python3 -m adaln_bench kernel-bench --op adaln_row_gather --op norm_modulate \
  --op gate_residual --op final_adaln_out --processes 3 --out "$OUT" "$@" \
  > "$OUT/kernel_bench.stdout" 2> "$OUT/kernel_bench.stderr"
rc=$?
echo "kernel-bench exit $rc after $(( $(date +%s) - kb_start )) s"
tail -n 4 "$OUT/kernel_bench.stderr"
if [ -n "${GPU_TESTS:-}" ]; then
  filter=(); [ -n "${GPU_TESTS_FILTER:-}" ] && filter=(-k "$GPU_TESTS_FILTER")
  timeout "${GPU_TESTS_TIMEOUT:-200}" python3 -m pytest -q -m gpu "${filter[@]}" tests/gpu/test_gathered_gpu.py \
    > "$OUT/gpu-tests.log" 2>&1
  echo "gpu tests exit $?"; tail -n 5 "$OUT/gpu-tests.log"
fi
# the short table last: the summary of the kernel-bench document
sed -n '/^| operator | candidate/,/^$/p' "$OUT"/*.md
( cd "$OUT" && find . -mindepth 1 -maxdepth 1 ! -name '*.json' ! -name '*.md' ! -name logs.tgz -printf '%f\n' > /tmp/kb_logs \
  && tar czf logs.tgz -T /tmp/kb_logs && xargs rm -rf < /tmp/kb_logs )
exit $rc
