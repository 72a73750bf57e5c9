#!/usr/bin/env bash
# Makes the files the device wrappers carry (.carry/, ignored by git) on a machine with PyPI, from the
# repository root. Each step is one folder; `all` makes every one, in this order:
#
#   frameworks      .carry/frameworks/{stage1,stage2}: slimmed vLLM and SGLang (tools/slim_frameworks.py build)
#   sglang-kernels  .carry/sglang-kernels/whl: SGLang with its two AdaLN kernels and what its import needs
#   whl             .carry/whl: pydantic, diffusers and CUTLASS's headers (report.sh, kernel_bench.sh, ...)
#   night           .carry/night: SGLang's kernel set and Liger (nightly.sh stage1)
#   solo            .carry/solo: every wheel of the nightly but vLLM's (nightly.sh start in one call, no vLLM)
#   kernel-cache    .carry/kernel-cache: the bundled libraries and the draws' library, prebuilt for ARCH
#                   (default sm_90a; the draws' need curand's headers: ADALN_BENCH_CURAND_INCLUDE, or the
#                   megatron step's build environment when it exists)
#   megatron        .carry/megatron: the Megatron / Transformer Engine staging (tools/stage_megatron.py:
#                   download, build-te-torch, reduce-core, fetch-megatron-lm, pack); needs PYTHON312, a CPython
#                   3.12, and MEGATRON_LM, a git directory of NVIDIA/Megatron-LM (MEGATRON_LM_COMMIT, default
#                   its main); the extension's build takes about 17 minutes on two cores
#
# Every wheel is pinned by SHA-256 (tools/slim/*.lock), so two machines make the same bytes, except the
# compiled libraries. Usage: bash tools/make_carry.sh all | STEP...
case "${1:-}" in -h | --help | "") awk 'NR == 1 && /^#!/ { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "$0"; exit 0 ;; esac
set -euo pipefail
cd "$(dirname "$0")/.."
CARRY=.carry
ARCH=${ARCH:-sm_90a}

step_frameworks() { python3 tools/slim_frameworks.py build --out "$CARRY/frameworks"; }
step_sglang_kernels() { python3 tools/slim_frameworks.py kernels build --out "$CARRY/sglang-kernels"; }
extras() {  # the wheels of tools/slim/carry-extras.lock, hash-checked, into build/carry-extras
  python3 -m pip download -q --no-deps --only-binary=:all: --require-hashes -d build/carry-extras \
    -r tools/slim/carry-extras.lock
}
fresh() {  # NAME: .carry/NAME empty, SGLang's set and the extras at hand to fill it from
  [ -d "$CARRY/sglang-kernels/whl" ] || step_sglang_kernels
  extras
  rm -rf "${CARRY:?}/$1" && mkdir -p "$CARRY/$1"
}
step_whl() {
  fresh whl
  local name
  for name in pydantic- pydantic_core- annotated_types- typing_inspection- diffusers- importlib_metadata-; do
    cp "$CARRY"/sglang-kernels/whl/"$name"*.whl "$CARRY/whl/"
  done
  cp build/carry-extras/nvidia_cutlass-*.whl "$CARRY/whl/"
}
step_night() {
  fresh night
  cp "$CARRY"/sglang-kernels/whl/sglang-*0slimkernels*.whl build/carry-extras/liger_kernel-*.whl "$CARRY/night/"
}
step_solo() {
  fresh solo
  cp "$CARRY"/sglang-kernels/whl/*.whl build/carry-extras/liger_kernel-*.whl "$CARRY/solo/"
}
step_kernel_cache() {
  mkdir -p "$CARRY/kernel-cache"
  export ADALN_BENCH_KERNEL_CACHE=$PWD/$CARRY/kernel-cache
  local module
  for module in adaln_bench.kernels.bundled.build adaln_bench.kernels.gathered.build adaln_bench.kernels.timestep_mlp.build; do
    python3 -m "$module" --arch "$ARCH"
  done
  local curand=${ADALN_BENCH_CURAND_INCLUDE:-}
  if [ -z "$curand" ]; then curand=$(ls -d build/te-venv/lib/python3.12/site-packages/nvidia/cu*/include 2>/dev/null | head -n 1); fi
  if [ -n "$curand" ]; then
    ADALN_BENCH_CURAND_INCLUDE=$curand python3 -m adaln_bench.draws.build --arch "$ARCH"
  else
    echo "the draws' library is left out (no curand headers): the GPU machine builds it at its first use"
  fi
}
step_megatron() {
  : "${PYTHON312:?PYTHON312: a CPython 3.12 (megatron-core 0.17 on needs it)}" "${MEGATRON_LM:?MEGATRON_LM: a git directory of NVIDIA/Megatron-LM}"
  python3 tools/stage_megatron.py download
  python3 tools/stage_megatron.py build-te-torch --python "$PYTHON312" --jobs "${JOBS:-2}" --reuse
  python3 tools/stage_megatron.py reduce-core
  python3 tools/stage_megatron.py fetch-megatron-lm --repo "$MEGATRON_LM" ${MEGATRON_LM_COMMIT:+--commit "$MEGATRON_LM_COMMIT"}
  python3 tools/stage_megatron.py pack --out "$CARRY/megatron"
}

ALL=(frameworks sglang-kernels whl night solo megatron kernel-cache)
steps=("$@")
[ "${steps[0]}" = all ] && steps=("${ALL[@]}")
for s in "${steps[@]}"; do  # every name checked before any step runs
  declare -F "step_${s//-/_}" > /dev/null || { echo "make_carry.sh: no step $s (${ALL[*]}, all)" >&2; exit 2; }
done
for s in "${steps[@]}"; do
  echo "== $s"
  "step_${s//-/_}"
done
du -sh "$CARRY"/* 2>/dev/null
