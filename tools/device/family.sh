#!/usr/bin/env bash
# One device call of the operator family: the carried wheels and kernel libraries (setup.sh), the
# draw-geometry check (tools/draws_check.py), then one `adaln-bench run` with the given options; the
# reports, the run index and the logs under $OUT/family/ (two folders down: what comes back).
# Usage (on the GPU machine, from the repo root): bash tools/device/family.sh [run options…]
#   DRAWS=1: run tools/draws_check.py first; NAME=family (default): the folder under $OUT
#   TE_STAGING=PATH: install that Megatron/TE staging tarball first (tools/stage_megatron.py install; carry
#   .carry/megatron), so that Transformer Engine's candidates can run; its install log is $OUT/te-install.log
#   SGLANG_KERNELS=DIR: install the sglang-kernels carry (tools/slim_frameworks.py kernels build) into
#   /tmp/sglk-site first and check its kernel files, so that SGLang's kernel candidates can run
case "${1:-}" in -h | --help) awk 'NR == 1 && /^#!/ { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "$0"; exit 0 ;; esac
set -uo pipefail
NAME=${NAME:-family}
source "$(dirname "$0")/setup.sh"
export ADALN_BENCH_COMMIT=${ADALN_BENCH_COMMIT:-}
if [ -n "${TE_STAGING:-}" ]; then
  python3 tools/stage_megatron.py install --tarball "$TE_STAGING" --dest /tmp/megatron-stage \
    > "$OUT/te-exports.sh" 2> "$OUT/te-install.log" || { cat "$OUT/te-install.log"; exit 1; }
  source "$OUT/te-exports.sh"; tail -n 1 "$OUT/te-install.log"
fi
if [ -n "${SGLANG_KERNELS:-}" ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/sglk-site \
    "$SGLANG_KERNELS"/whl/*.whl > "$OUT/sglk-install.log" 2>&1 || { cat "$OUT/sglk-install.log"; exit 1; }
  export PYTHONPATH=/tmp/sglk-site:$PYTHONPATH SGLANG_JIT_CACHE_DIR=/tmp/sglk-jit
  python3 tools/slim_frameworks.py kernels verify --site /tmp/sglk-site >> "$OUT/sglk-install.log" 2>&1
  echo "sglang-kernels verify exit $?"; tail -n 2 "$OUT/sglk-install.log"
fi
if [ -n "${DRAWS:-}" ]; then
  timeout 120 python3 tools/draws_check.py --json "$OUT/draws.json" > "$OUT/draws.log" 2>&1
  echo "draws check exit $?"; tail -n 12 "$OUT/draws.log"
fi
if [ -n "${SMOKE:-}" ]; then  # every operator, tiny and quick: a GPU path that breaks shows in a minute
  python3 -m adaln_bench run --device cuda --preset tiny --quick --mode plain --quiet --no-cold-start \
    --out "$OUT/smoke" > "$OUT/smoke.log" 2>&1; echo "smoke exit $?"; grep -E "failed|Error" "$OUT/smoke.log" | head -20
fi
echo "== adaln-bench run $*"
start=$(date +%s)
python3 -m adaln_bench run --device cuda --out "$OUT/$NAME" "$@" > "$OUT/$NAME.log" 2>&1
rc=$?
echo "run exit $rc after $(( $(date +%s) - start )) s"
grep -v '^\[' "$OUT/$NAME.log" | grep -E "^  |invariant|report|exit|error|Error" | tail -c 6000
# At most 8 files come back: everything in one archive.
tar czf "$OUT/$NAME.tgz" -C "$OUT" --remove-files $(cd "$OUT" && ls -d "$NAME" "$NAME.log" draws.json draws.log smoke smoke.log nvidia-smi.txt pip.log te-install.log sglk-install.log 2>/dev/null)
exit $rc
