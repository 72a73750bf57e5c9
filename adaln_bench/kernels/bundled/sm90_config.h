// Tile configuration of the sm90 path (compile-time; defaults are the shipped recipe). Variants for
// experiments are built with -D overrides (build.py --define), which also change the cache key.
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
#define ADALN_DW_TN 128
#endif
// Optional small-T tile for the forward and d_act GEMMs (0 = off: one tile config for every T). When on,
// a T (or T block) <= ADALN_SMALL_T_MAX uses token tile ADALN_SMALL_TN; allowed only where the H200 showed
// identical bits across the switch.
#ifndef ADALN_SMALL_T_MAX
#define ADALN_SMALL_T_MAX 0
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
