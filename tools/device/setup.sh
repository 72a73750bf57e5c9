# Sourced by the one-call GPU scripts (report.sh, kernel_bench.sh, profile.sh): carried
# wheels into /tmp/site, PYTHONPATH, the carried kernel cache, CUTLASS's headers, and the GPU's state into $OUT.
# OUT (default /tmp/out) and WHEELS (default .carry/whl) may be set by the caller.
if [ "${BASH_SOURCE[0]}" = "$0" ]; then  # run, not sourced: only --help means anything
  case "${1:-}" in -h | --help) awk '/^#/ { sub(/^# ?/, ""); print; next } { exit }' "$0"; exit 0 ;; esac
  echo "setup.sh is sourced by the other wrappers: source it, or see --help" >&2; exit 2
fi
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}
WHEELS=${WHEELS:-.carry/whl}
mkdir -p "$OUT"
if ls "$WHEELS"/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site "$WHEELS"/*.whl \
    > "$OUT/pip.log" 2>&1 || { cat "$OUT/pip.log"; exit 1; }
fi
export PYTHONPATH=/tmp/site:$PWD:$PWD/tests
if [ -d .carry/kernel-cache ]; then
  mkdir -p /tmp/kernel-cache && cp -r .carry/kernel-cache/. /tmp/kernel-cache/
  export ADALN_BENCH_KERNEL_CACHE=/tmp/kernel-cache
fi
if [ -d /tmp/site/cutlass_library/source/include ]; then
  export ADALN_BENCH_CUTLASS_INCLUDE=/tmp/site/cutlass_library/source/include
fi
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader | tee "$OUT/nvidia-smi.txt"
