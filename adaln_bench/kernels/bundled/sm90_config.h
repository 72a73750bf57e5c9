// Tile configuration of the sm90 path (compile-time; the defaults are the shipped recipe). Experiment
// variants are built with -D overrides (build.py --define), which also change the cache key.
//
// Forward and d_act pick a tile by T (the forward) or by the T block (d_act, <= 512 rows), in tiers:
//   tier 0: T <= ADALN_TIER0_MAX (0 = no such tier), tile TIER0_TM x TIER0_TN x TIER0_TK, pingpong if
//           TIER0_PINGPONG
//   tier 1: T <= ADALN_TIER1_MAX, tile TIER1_TM x TIER1_TN x TIER1_TK, pingpong if TIER1_PINGPONG
//   tier 2: T <= ADALN_TIER2_MAX (0 = none), cooperative 128 x TIER2_TN
//   large:  otherwise, cooperative FWD_LARGE_TM x FWD_LARGE_TN in FWD_LARGE_CLUSTER_M x 1 clusters (forward),
//           DACT_LARGE_* (d_act; its M is D = 2688, which 256 does not divide)
// A switch with T is allowed only because the H200 gave identical bits across every tile shape and schedule
// tried (wgmma m64nNk16 for N = 16 ... 256, and mma.sync): re-check on any new GPU, CUTLASS or nvcc.
// dW (K = T: only repeatable, never compared across batches) has one configuration.
//
// Shipped v3 (NOTES.md, "v3"): T <= 16: 128x16x128; T <= 64: 128x64x128; T <= 128: 128x128; larger: forward
// 128x256, d_act 128x256 in 2x1 clusters; dW pingpong 128x128 (and on CUDA cores at T = 1, api.cu).
// (v2: 128x64 up to 64, then 128x128; dW 128x256.)
#pragma once

#ifndef ADALN_TIER0_MAX
#define ADALN_TIER0_MAX 16
#endif
#ifndef ADALN_TIER0_TM
#define ADALN_TIER0_TM 128
#endif
#ifndef ADALN_TIER0_TN
#define ADALN_TIER0_TN 16
#endif
#ifndef ADALN_TIER0_TK
#define ADALN_TIER0_TK 128
#endif
#ifndef ADALN_TIER0_PINGPONG
#define ADALN_TIER0_PINGPONG false
#endif
#ifndef ADALN_TIER1_MAX
#define ADALN_TIER1_MAX 64
#endif
#ifndef ADALN_TIER1_TM
#define ADALN_TIER1_TM 128
#endif
#ifndef ADALN_TIER1_TN
#define ADALN_TIER1_TN 64
#endif
#ifndef ADALN_TIER1_TK
#define ADALN_TIER1_TK 128
#endif
#ifndef ADALN_TIER1_PINGPONG
#define ADALN_TIER1_PINGPONG false
#endif
#ifndef ADALN_TIER2_MAX
#define ADALN_TIER2_MAX 128
#endif
#ifndef ADALN_TIER2_TN
#define ADALN_TIER2_TN 128
#endif
#ifndef ADALN_FWD_LARGE_TM
#define ADALN_FWD_LARGE_TM 128
#endif
#ifndef ADALN_FWD_LARGE_TN
#define ADALN_FWD_LARGE_TN 256
#endif
#ifndef ADALN_FWD_LARGE_CLUSTER_N
#define ADALN_FWD_LARGE_CLUSTER_N 1
#endif
#ifndef ADALN_FWD_LARGE_CLUSTER_M
#define ADALN_FWD_LARGE_CLUSTER_M 1
#endif
#ifndef ADALN_DACT_LARGE_TM
#define ADALN_DACT_LARGE_TM 128
#endif
#ifndef ADALN_DACT_LARGE_TN
#define ADALN_DACT_LARGE_TN 256
#endif
#ifndef ADALN_DACT_LARGE_CLUSTER_N
#define ADALN_DACT_LARGE_CLUSTER_N 1
#endif
#ifndef ADALN_DACT_LARGE_CLUSTER_M
#define ADALN_DACT_LARGE_CLUSTER_M 2
#endif
#ifndef ADALN_DW_TM
#define ADALN_DW_TM 128
#endif
#ifndef ADALN_DW_TN
#define ADALN_DW_TN 128
#endif
#ifndef ADALN_DW_CLUSTER_M
#define ADALN_DW_CLUSTER_M 1
#endif
#ifndef ADALN_DW_PINGPONG
#define ADALN_DW_PINGPONG true
#endif
#ifndef ADALN_DW_DIRECT_STORE
#define ADALN_DW_DIRECT_STORE false
#endif

#define ADALN_STR2(x) #x
#define ADALN_STR(x) ADALN_STR2(x)
#define ADALN_SM90_CONFIG                                                                                     \
  "fwd/d_act tiers: T<=" ADALN_STR(ADALN_TIER0_MAX) " " ADALN_STR(ADALN_TIER0_TM) "x" ADALN_STR(ADALN_TIER0_TN) "x"   \
  ADALN_STR(ADALN_TIER0_TK) " pp=" ADALN_STR(ADALN_TIER0_PINGPONG) ", T<=" ADALN_STR(ADALN_TIER1_MAX) " "             \
  ADALN_STR(ADALN_TIER1_TM) "x" ADALN_STR(ADALN_TIER1_TN) "x" ADALN_STR(ADALN_TIER1_TK) " pp="                        \
  ADALN_STR(ADALN_TIER1_PINGPONG) ", T<=" ADALN_STR(ADALN_TIER2_MAX) " 128x" ADALN_STR(ADALN_TIER2_TN)                \
  " (0 = tier off); larger: fwd " ADALN_STR(ADALN_FWD_LARGE_TM) "x" ADALN_STR(ADALN_FWD_LARGE_TN) " cluster "         \
  ADALN_STR(ADALN_FWD_LARGE_CLUSTER_M) "x" ADALN_STR(ADALN_FWD_LARGE_CLUSTER_N) ", d_act " ADALN_STR(ADALN_DACT_LARGE_TM) "x" ADALN_STR(ADALN_DACT_LARGE_TN) \
  " cluster " ADALN_STR(ADALN_DACT_LARGE_CLUSTER_M) "x" ADALN_STR(ADALN_DACT_LARGE_CLUSTER_N) " (k 64); dW " ADALN_STR(ADALN_DW_TM) "x" ADALN_STR(ADALN_DW_TN) \
  " cluster " ADALN_STR(ADALN_DW_CLUSTER_M) "x1 pp=" ADALN_STR(ADALN_DW_PINGPONG) " direct="                           \
  ADALN_STR(ADALN_DW_DIRECT_STORE) "; dW on CUDA cores for T<=" ADALN_STR(ADALN_DW_SIMT_MAX) "; d_act T block "   \
  ADALN_STR(ADALN_T_BLOCK)
