#!/usr/bin/env bash
# One device call for a committed report: the carried wheels, optionally a quick GPU smoke run, then one
# `adaln-bench run` with the given options, its summary, and the report under $OUT.
# Usage (on the GPU machine, from the repo root): bash tools/device/report.sh [run options…]
#   one operator per call: --op OP among the options (none given: --op adaln_projection)
#   WHEELS=dir (default .carry/whl): wheels to install into /tmp/site first (none: skip)
#   .carry/kernel-cache, when carried: prebuilt bundled-kernel libraries (else they are built there)
#   SMOKE=1: a tiny quick plain run first; REPORT_GPU_TESTS=pattern: pytest tests/gpu -k pattern after the run
#   (not GPU_TESTS, which kernel_bench.sh reads as a flag: one call running both once ran `-k 1`)
#   NAME=report (default): the report is $OUT/$NAME.json, its log $OUT/$NAME.log
case "${1:-}" in -h | --help) awk 'NR == 1 && /^#!/ { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "$0"; exit 0 ;; esac
set -uo pipefail
NAME=${NAME:-report}
source "$(dirname "$0")/setup.sh"
# --out names one report file, which means one operator: the one given, or the projection.
op=(--op adaln_projection)
for arg in "$@"; do case "$arg" in --op | --op=*) op=() ;; esac; done
if [ -n "${SMOKE:-}" ]; then
  python3 -m adaln_bench run --device cuda --preset tiny --quick --mode plain --quiet --op adaln_projection --out "$OUT/smoke.json" \
    > "$OUT/smoke.log" 2>&1 || { echo "smoke run failed"; tail -20 "$OUT/smoke.log"; exit 1; }
fi
echo "== adaln-bench run $*"
start=$(date +%s)
python3 -m adaln_bench run --device cuda ${op[@]+"${op[@]}"} --out "$OUT/$NAME.json" "$@" > "$OUT/$NAME.log" 2>&1
rc=$?
echo "run exit $rc after $(( $(date +%s) - start )) s"
grep -v '^\[' "$OUT/$NAME.log" | tail -c 2500
if [ -n "${REPORT_GPU_TESTS:-}" ]; then
  timeout "${GPU_TESTS_TIMEOUT:-360}" python3 -m pytest -q -m gpu tests/gpu -k "$REPORT_GPU_TESTS" > "$OUT/gpu-tests.log" 2>&1
  echo "gpu tests exit $?"; tail -n 5 "$OUT/gpu-tests.log"
fi
exit $rc
