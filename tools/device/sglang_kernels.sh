#!/usr/bin/env bash
# SGLang's two AdaLN kernels on the GPU machine, in one device call (docs/compat.md, "SGLang's kernels").
#   bash tools/device/sglang_kernels.sh [CARRY]   # CARRY: what `slim_frameworks.py kernels build` wrote
# Run from a folder holding adaln_bench/ and tools/. Installs CARRY/whl into /tmp/sglk-site, checks the
# kernel files against their pinned SHA-256, calls each kernel once (tools/device/sglang_kernels_check.py), then
# runs the harness (quick, plain, candidates sglang and diffusers) on both operators into $OUT/sg.
case "${1:-}" in -h | --help) awk 'NR == 1 && /^#!/ { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "$0"; exit 0 ;; esac
set -u
CARRY=${1:-.carry/sglang-kernels}
OUT=${OUT:-/tmp/sglk-out}
SITE=/tmp/sglk-site
export SGLANG_JIT_CACHE_DIR=/tmp/sglk-jit
mkdir -p "$OUT"
t0=$(date +%s)
stamp() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
stamp "$(nvidia-smi -L | head -1); $(nvcc --version | tail -1); ninja $(ninja --version)"
python3 -c 'import sys, torch; print("python", sys.version.split()[0], "torch", torch.__version__)'
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" "$CARRY"/whl/*.whl 2>&1 | tail -3
export PYTHONPATH=$SITE:$PWD
stamp "installed $(ls "$CARRY"/whl | wc -l) wheels"
python3 tools/slim_frameworks.py kernels verify --site "$SITE"
stamp "kernels, once each"
timeout 50 python3 tools/device/sglang_kernels_check.py kernels
stamp "harness"
timeout 110 python3 -m adaln_bench run --device cuda --op timestep_sinusoid --op norm_modulate --mode plain \
  --candidate sglang --candidate diffusers --no-cold-start --quick --out "$OUT/sg" 2>&1 | tail -60
echo "harness rc=${PIPESTATUS[0]}"
stamp "summary"
python3 tools/device/sglang_kernels_check.py summary "$OUT/sg"
stamp "done"
