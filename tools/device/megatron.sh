#!/usr/bin/env bash
# One device call for the real Megatron modes: install the carried staging (tools/stage_megatron.py), check
# Transformer Engine against FP64, check each Megatron switch, then one `adaln-bench run` of the three Megatron
# modes from the staged Megatron-LM main tree, and check the report's switch files against the staging.
# Usage (on the GPU machine, from the repo root; carry .carry/megatron): bash tools/device/megatron.sh [run options…]
#   run options replace the default `--mode megatron_te_native --mode megatron_triton --mode megatron_triton_ieee
#   --repeat 3`; --device cuda, --megatron-src and --out are always given.
#   TARBALL (default .carry/megatron/megatron-stage.tar.xz), STAGE (default /tmp/megatron-stage),
#   RUN_TIMEOUT (default 390 s, and never past BUDGET, default 530 s from the start: SIGTERM, and the harness
#   writes the finished modes as an incomplete report),
#   NAME=megatron: the report is $OUT/$NAME.json, its log $OUT/$NAME.log. Everything else is logged under $OUT.
#   SKIP_CHECKS=1: skip the TE and switch checks (about a minute), e.g. when a run needs the time.
#   EXTRA_RUN="run options": after the Megatron run, one more `adaln-bench run` with TE importable from the
#   staging (e.g. TE's RMSNorm as a norm_modulate candidate), into $OUT/$NAME-extra/, log $OUT/$NAME-extra.log.
case "${1:-}" in -h | --help) awk 'NR == 1 && /^#!/ { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "$0"; exit 0 ;; esac
set -uo pipefail
NAME=${NAME:-megatron}
TARBALL=${TARBALL:-.carry/megatron/megatron-stage.tar.xz}
STAGE=${STAGE:-/tmp/megatron-stage}
source "$(dirname "$0")/setup.sh"
t0=$(date +%s)
since() { echo "$(( $(date +%s) - t0 )) s"; }

echo "== install $TARBALL"
python3 tools/stage_megatron.py install --tarball "$TARBALL" --dest "$STAGE" > "$OUT/exports.sh" 2> "$OUT/install.log"
rc=$?
cat "$OUT/install.log"
[ $rc -eq 0 ] || { echo "install failed (exit $rc)"; exit 1; }
source "$OUT/exports.sh"
cp "$STAGE/manifest.json" "$OUT/staging-manifest.json"
echo "installed after $(since)"

if [ -z "${SKIP_CHECKS:-}" ]; then
echo "== Transformer Engine against FP64 (plain, then after Megatron main's triton and te_native switches)"
timeout 120 python3 tools/device/te_check.py --out "$OUT/te-check.json" > "$OUT/te-check.log" 2>&1
echo "te-check exit $?"; grep -v '^\[' "$OUT/te-check.log" | tail -n 12
for backend in triton te_native; do
  env_ws=(); [ "$backend" = te_native ] && env_ws=(CUBLASLT_WORKSPACE_SIZE=0)
  env ${env_ws[@]+"${env_ws[@]}"} timeout 90 python3 tools/device/te_check.py --megatron-backend "$backend" \
    --out "$OUT/te-check-$backend.json" > "$OUT/te-check-$backend.log" 2>&1
  echo "te-check after Megatron $backend exit $?"; grep -v '^\[' "$OUT/te-check-$backend.log" | tail -n 6
done
echo "te checks done after $(since)"

echo "== Megatron switches (tests/standins/support/drive_mode.py: the switch as the harness child calls it)"
summarize() {
  python3 - "$1" <<'EOF'
import json, sys
text = open(sys.argv[1]).read().strip().splitlines()
try:
    r = json.loads(text[-1])
except Exception:
    r = {"error": "no JSON output (see the .err file)"}
if "error" in r:
    print(f"  {r['error']}: {r['message'][:300]}" if "message" in r else f"  {r['error']}")
else:
    n = r.get("notes", {})
    print(f"  {r['path']}  {r['library']} {r['library_version']}  commit {n.get('megatron_source_commit')}")
    print(f"  overrides {r['observed'].get('aten_overrides')}  staging_module: {n.get('staging_module')}")
EOF
}
check_switch() {  # name mode source env...
  local name=$1 mode=$2 src=$3; shift 3
  env "$@" timeout 90 python3 tests/standins/support/drive_mode.py "$mode" $src > "$OUT/switch-$name.json" 2> "$OUT/switch-$name.err"
  echo "$name (exit $?):"; summarize "$OUT/switch-$name.json"
}
check_switch main-te_native megatron_te_native "$ADALN_BENCH_MEGATRON_LM" CUBLASLT_WORKSPACE_SIZE=0
check_switch main-triton megatron_triton "$ADALN_BENCH_MEGATRON_LM"
check_switch core-0.19.2-triton megatron_triton ""
check_switch core-0.19.2-te_native megatron_te_native "" CUBLASLT_WORKSPACE_SIZE=0
echo "switch checks done after $(since)"
fi

if [ $# -gt 0 ]; then args=("$@"); else
  args=(--mode megatron_te_native --mode megatron_triton --mode megatron_triton_ieee --repeat 3); fi
echo "== adaln-bench run ${args[*]} --megatron-src $ADALN_BENCH_MEGATRON_LM"
start=$(date +%s)
limit=${RUN_TIMEOUT:-390}
left=$(( ${BUDGET:-530} - (start - t0) ))
[ "$left" -lt "$limit" ] && limit=$left
[ "$limit" -lt 60 ] && limit=60  # timeout 0 would mean none
echo "run limit $limit s"
# One report per operator under $OUT/$NAME/<op>/ (and the run index under runs/).
timeout --signal=TERM "$limit" python3 -m adaln_bench run --device cuda --megatron-src "$ADALN_BENCH_MEGATRON_LM" \
  --out "$OUT/$NAME" "${args[@]}" > "$OUT/$NAME.log" 2>&1
rc=$?
echo "run exit $rc after $(( $(date +%s) - start )) s"
grep -v '^\[' "$OUT/$NAME.log" | tail -c 2500
for report in "$OUT/$NAME"/*/*.json; do
  [ -f "$report" ] || continue
  case "$report" in */runs/*) continue ;; esac  # the run index lists reports; it is not one
  python3 tools/stage_megatron.py check-report "$report" --manifest "$STAGE/manifest.json" \
    >> "$OUT/check-report.txt" 2>&1
  echo "check-report $(basename "$report") exit $?"
done
[ -f "$OUT/check-report.txt" ] && cat "$OUT/check-report.txt"
if [ -n "${EXTRA_RUN:-}" ]; then
  echo "== adaln-bench run $EXTRA_RUN (TE from the staging)"
  # shellcheck disable=SC2086  # the options are words on purpose
  timeout --signal=TERM "${EXTRA_TIMEOUT:-150}" python3 -m adaln_bench run --device cuda --out "$OUT/$NAME-extra" \
    $EXTRA_RUN > "$OUT/$NAME-extra.log" 2>&1
  echo "extra run exit $?"; grep -v '^\[' "$OUT/$NAME-extra.log" | tail -c 2000
fi
echo "total $(since)"
# At most 8 files come back: everything in one archive.
(cd "$OUT" && tar czf "$NAME.tgz" --remove-files $(ls | grep -v "^$NAME.tgz$"))
exit $rc
