// Tile configuration of the sm90 path (compile-time; defaults are the shipped recipe). Variants for
// experiments are built with -D overrides (build.py --define), which also change the cache key.
// Shipped (v2, measured on the H200 as the "sm90_dispatch" build, see NOTES.md): fwd and d_act 128x128x64
// tiles, with a 128x64x64 tile (wgmma m64n64k16 instead of m64n128k16) when T (fwd) or the T block (d_act)
// is <= 64; dW 128x256x64. The H200 showed identical bits across the switch (and against single-config
// 128x128 and 128x64 builds, and against the mma.sync path) on every row tested.
#pragma once

#ifndef ADALN_FWD_TM
#define ADALN_FWD_TM 128
#endif
#ifndef ADALN_FWD_TN
#define ADALN_FWD_TN 128
#endif
#ifndef ADALN_DACT_TM
#define ADALN_DACT_TM 128
#endif
#ifndef ADALN_DACT_TN
#define ADALN_DACT_TN 128
#endif
#ifndef ADALN_DW_TM
#define ADALN_DW_TM 128
#endif
#ifndef ADALN_DW_TN
#define ADALN_DW_TN 256
#endif
// Small-T tile for the forward and d_act GEMMs (0 = off: one tile config for every T). When on, a T (or
// T block) <= ADALN_SMALL_T_MAX uses token tile ADALN_SMALL_TN; allowed only because the H200 showed
// identical bits across the switch (re-check on any new GPU, CUTLASS or nvcc).
#ifndef ADALN_SMALL_T_MAX
#define ADALN_SMALL_T_MAX 64
#endif
#ifndef ADALN_SMALL_TN
#define ADALN_SMALL_TN 64
#endif

#define ADALN_STR2(x) #x
#define ADALN_STR(x) ADALN_STR2(x)
#define ADALN_SM90_CONFIG                                                                                 \
  "tiles fwd " ADALN_STR(ADALN_FWD_TM) "x" ADALN_STR(ADALN_FWD_TN) "x64, d_act " ADALN_STR(ADALN_DACT_TM) \
  "x" ADALN_STR(ADALN_DACT_TN) "x64, dW " ADALN_STR(ADALN_DW_TM) "x" ADALN_STR(ADALN_DW_TN)                \
  "x64, cluster 1x1; small-T tile: T<=" ADALN_STR(ADALN_SMALL_T_MAX) " -> N " ADALN_STR(ADALN_SMALL_TN)
