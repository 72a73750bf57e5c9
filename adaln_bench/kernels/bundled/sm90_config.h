// Tile configuration of the sm90 path (compile-time; the defaults are the shipped recipe). Experiment
// variants are built with -D overrides (build.py --define), which also change the cache key.
//
// Forward and d_act pick a tile by T (the forward) or by the T block (d_act), in tiers (sm90_common.cuh
// `TokenTiers`): the first tier whose bound holds (bound 0 = tier off), else the GEMM's large configuration.
//   forward: FWD_TIER0, 0B, 0C, 1, 1B, 2, 3 (TM x TN x TK, pingpong or cooperative), above them FWD_LARGE
//            (cooperative, FWD_LARGE_CLUSTER_M x _N clusters).
//   d_act:   DACT_TIER0 .. DACT_TIER2 (128 x TN x 64), above them DACT_LARGE. Its k-tile is 64 on every tier:
//            the chunk sums restart the accumulator every 4032 (= 63 x 64) of K, so a k-tile may not straddle
//            a chunk boundary.
// A switch with T is allowed only because the H200 gave identical bits across every tile shape and schedule
// tried (wgmma m64nNk16 for N = 16 ... 256, and mma.sync): re-check on any new GPU, CUTLASS or nvcc.
// dW (K = T: only repeatable, never compared across batches) has one configuration.
//
// Shipped v4 (git:NOTES.md, "v4" to "v6"): forward as v3.1 up to 128 rows (T <= 16: 128x16x128; T <= 64:
// 128x64x128; T <= 128: 128x128), 128x256 up to 256, 256x128 in 1x2 clusters above (64-wide epilogue
// subtiles; the tile order swizzled in pairs on every tier); d_act sums its chunks inside the GEMM, 128x16 /
// 128x64 / 128x128 up to 16 / 64 / 128 rows and 128x128 in 1x2 clusters above; dW pingpong 128x192 with
// 64x192 epilogue subtiles (and on CUDA cores at T = 1, api.cu). v7 (git:NOTES.md "v7"): dW above 64 rows in 2x1
// clusters (the act tile multicast), up to 64 rows as before. v11 (git:NOTES.md "v10.1 run 21", "v11 as
// shipped"): the forward in 128x96 tiles for 64 < T <= 96 (tier 1B, between tiers 1 and 2). v11.1 (git:NOTES.md
// "v11.1 run 24"): 128x32 for 16 < T <= 32 and 128x48 for 32 < T <= 48 (tiers 0B, 0C). v12 (git:NOTES.md "v12 run
// 25"): dW up to 64 rows in 64x96 epilogue subtiles with 4 store stages (was 64x192 with 2).
// v14 (git:NOTES.md "v13 run 33" to "v14 run 35"): above 256 rows the forward is a 128x128 pingpong in 1x2 clusters
// (was 256x128 cooperative), or 256x128 cooperative without clusters where the token-tile count is odd; its
// swizzle never pads the tile grid.
#pragma once

// Programmatic dependent launch for every kernel of a call (the knob ADALN_PDL and its default: pdl.cuh);
// CUTLASS's kernels then wait for the previous kernel before their first load.
#include "pdl.cuh"
#if ADALN_PDL && !defined(CUTLASS_ENABLE_GDC_FOR_SM90)
#define CUTLASS_ENABLE_GDC_FOR_SM90 1
#endif

#ifndef ADALN_FWD_TIER0_MAX
#define ADALN_FWD_TIER0_MAX 16
#endif
#ifndef ADALN_FWD_TIER0_TM
#define ADALN_FWD_TIER0_TM 128
#endif
#ifndef ADALN_FWD_TIER0_TN
#define ADALN_FWD_TIER0_TN 16
#endif
#ifndef ADALN_FWD_TIER0_TK
#define ADALN_FWD_TIER0_TK 128
#endif
#ifndef ADALN_FWD_TIER0_PINGPONG
#define ADALN_FWD_TIER0_PINGPONG false
#endif
// Two tiers between tiers 0 and 1 (0 = off): 128x32 up to 32 rows, 128x48 up to 48 (git:NOTES.md "v11.1 run 24":
// forward at T = 17 / 24 / 32 0.95x cuBLAS against the 128x64 tier's 1.16 / 1.06 / 1.05x, at T = 33 0.99x on
// 128x48 against 1.04x; bits identical).
#ifndef ADALN_FWD_TIER0B_MAX
#define ADALN_FWD_TIER0B_MAX 32
#endif
#ifndef ADALN_FWD_TIER0B_TM
#define ADALN_FWD_TIER0B_TM 128
#endif
#ifndef ADALN_FWD_TIER0B_TN
#define ADALN_FWD_TIER0B_TN 32
#endif
#ifndef ADALN_FWD_TIER0C_MAX
#define ADALN_FWD_TIER0C_MAX 48
#endif
#ifndef ADALN_FWD_TIER0C_TM
#define ADALN_FWD_TIER0C_TM 128
#endif
#ifndef ADALN_FWD_TIER0C_TN
#define ADALN_FWD_TIER0C_TN 48
#endif
#ifndef ADALN_FWD_TIER1_MAX
#define ADALN_FWD_TIER1_MAX 64
#endif
#ifndef ADALN_FWD_TIER1_TM
#define ADALN_FWD_TIER1_TM 128
#endif
#ifndef ADALN_FWD_TIER1_TN
#define ADALN_FWD_TIER1_TN 64
#endif
#ifndef ADALN_FWD_TIER1_TK
#define ADALN_FWD_TIER1_TK 128
#endif
#ifndef ADALN_FWD_TIER1_PINGPONG
#define ADALN_FWD_TIER1_PINGPONG false
#endif
// A tier between tiers 1 and 2 (0 = off): 128x96 up to 96 rows (git:NOTES.md "v10.1 run 21": forward at T = 65 / 80 /
// 96 141 / 138 / 139 µs against the 128x128 tier's 166 / 166 / 153, bits identical; a 128x112 tile to 112 rows
// was far slower, 230-240 µs).
#ifndef ADALN_FWD_TIER1B_MAX
#define ADALN_FWD_TIER1B_MAX 96
#endif
#ifndef ADALN_FWD_TIER1B_TM
#define ADALN_FWD_TIER1B_TM 128
#endif
#ifndef ADALN_FWD_TIER1B_TN
#define ADALN_FWD_TIER1B_TN 96
#endif
#ifndef ADALN_FWD_TIER2_MAX
#define ADALN_FWD_TIER2_MAX 128
#endif
#ifndef ADALN_FWD_TIER2_TM
#define ADALN_FWD_TIER2_TM 128
#endif
#ifndef ADALN_FWD_TIER2_TN
#define ADALN_FWD_TIER2_TN 128
#endif
#ifndef ADALN_FWD_TIER3_MAX
#define ADALN_FWD_TIER3_MAX 256
#endif
#ifndef ADALN_FWD_TIER3_TM
#define ADALN_FWD_TIER3_TM 128
#endif
#ifndef ADALN_FWD_TIER3_TN
#define ADALN_FWD_TIER3_TN 256
#endif
// Above the tiers, a T whose count of large token tiles the large clusters would round up (one empty tile column:
// its mainloop still runs, on zero-filled loads) takes this configuration instead (0 = off). v14 (git:NOTES.md "v14
// run 35"): the large tier's 128x128 pingpong lost 5-20 % to the cooperative 256x128 tile at such counts.
#ifndef ADALN_FWD_ODD
#define ADALN_FWD_ODD 1
#endif
#ifndef ADALN_FWD_ODD_TM
#define ADALN_FWD_ODD_TM 256
#endif
#ifndef ADALN_FWD_ODD_TN
#define ADALN_FWD_ODD_TN 128
#endif
#ifndef ADALN_FWD_ODD_CLUSTER_N
#define ADALN_FWD_ODD_CLUSTER_N 1
#endif
#ifndef ADALN_FWD_LARGE_TM
#define ADALN_FWD_LARGE_TM 128
#endif
#ifndef ADALN_FWD_LARGE_TN
#define ADALN_FWD_LARGE_TN 128
#endif
#ifndef ADALN_FWD_LARGE_CLUSTER_M
#define ADALN_FWD_LARGE_CLUSTER_M 1
#endif
// The large forward tile's schedule: cooperative (both consumer warpgroups on one tile, the epilogue between
// tiles) or pingpong (each warpgroup a whole tile, one's epilogue beside the other's mainloop).
#ifndef ADALN_FWD_LARGE_PINGPONG
#define ADALN_FWD_LARGE_PINGPONG true
#endif
#ifndef ADALN_FWD_LARGE_CLUSTER_N
#define ADALN_FWD_LARGE_CLUSTER_N 2
#endif
// The large forward tile's epilogue subtile width along N (tokens; 0: CUTLASS's choice, 32).
#ifndef ADALN_FWD_LARGE_EPI_N
#define ADALN_FWD_LARGE_EPI_N 64
#endif
// The forward's persistent tile order: along N (tokens) or along M (W rows), in swizzled groups of at most this
// many (fewer where a group would pad the tile grid: sm90_common.cuh `padless_swizzle`).
#ifndef ADALN_FWD_RASTER_ALONG_M
#define ADALN_FWD_RASTER_ALONG_M 0
#endif
#ifndef ADALN_FWD_SWIZZLE
#define ADALN_FWD_SWIZZLE 2
#endif
#ifndef ADALN_DACT_TIER0_MAX
#define ADALN_DACT_TIER0_MAX 16
#endif
#ifndef ADALN_DACT_TIER0_TN
#define ADALN_DACT_TIER0_TN 16
#endif
#ifndef ADALN_DACT_TIER1_MAX
#define ADALN_DACT_TIER1_MAX 64
#endif
#ifndef ADALN_DACT_TIER1_TN
#define ADALN_DACT_TIER1_TN 64
#endif
#ifndef ADALN_DACT_TIER2_MAX
#define ADALN_DACT_TIER2_MAX 128
#endif
#ifndef ADALN_DACT_TIER2_TN
#define ADALN_DACT_TIER2_TN 128
#endif
#ifndef ADALN_DACT_LARGE_TM
#define ADALN_DACT_LARGE_TM 128
#endif
#ifndef ADALN_DACT_LARGE_TN
#define ADALN_DACT_LARGE_TN 128
#endif
#ifndef ADALN_DACT_LARGE_CLUSTER_M
#define ADALN_DACT_LARGE_CLUSTER_M 1
#endif
#ifndef ADALN_DACT_LARGE_CLUSTER_N
#define ADALN_DACT_LARGE_CLUSTER_N 2
#endif
// As the forward's ADALN_FWD_ODD (v15): a T block whose count of large token tiles the clusters would round up
// takes the large tile without clusters (0 = off): 3 token tiles ran as 4 at T = 300.
#ifndef ADALN_DACT_ODD
#define ADALN_DACT_ODD 1
#endif
// Cluster size along M (W rows, or D for d_act) per token tier: CTAs of one cluster share the token-side tile
// (activations / dY) through TMA multicast, so it is read from L2 once per cluster (an experiment knob; 1 = off).
#ifndef ADALN_FWD_TIER0_CLUSTER_M
#define ADALN_FWD_TIER0_CLUSTER_M 1
#endif
#ifndef ADALN_FWD_TIER1_CLUSTER_M
#define ADALN_FWD_TIER1_CLUSTER_M 1
#endif
#ifndef ADALN_FWD_TIER2_CLUSTER_M
#define ADALN_FWD_TIER2_CLUSTER_M 1
#endif
#ifndef ADALN_DACT_TIER0_CLUSTER_M
#define ADALN_DACT_TIER0_CLUSTER_M 1
#endif
#ifndef ADALN_DACT_TIER1_CLUSTER_M
#define ADALN_DACT_TIER1_CLUSTER_M 1
#endif
#ifndef ADALN_DACT_TIER2_CLUSTER_M
#define ADALN_DACT_TIER2_CLUSTER_M 1
#endif
#ifndef ADALN_DW_TM
#define ADALN_DW_TM 128
#endif
#ifndef ADALN_DW_TN
#define ADALN_DW_TN 192
#endif
#ifndef ADALN_DW_CLUSTER_M
#define ADALN_DW_CLUSTER_M 2
#endif
// dW up to ADALN_DW_TIER0_MAX rows (0 = no tier): its own tile, schedule, cluster along M, epilogue subtile
// width and store stages (0: the builder's, 2); by default the tile and schedule of the large configuration.
#ifndef ADALN_DW_TIER0_MAX
#define ADALN_DW_TIER0_MAX 64
#endif
#ifndef ADALN_DW_TIER0_TM
#define ADALN_DW_TIER0_TM ADALN_DW_TM
#endif
#ifndef ADALN_DW_TIER0_TN
#define ADALN_DW_TIER0_TN ADALN_DW_TN
#endif
#ifndef ADALN_DW_TIER0_PINGPONG
#define ADALN_DW_TIER0_PINGPONG ADALN_DW_PINGPONG
#endif
#ifndef ADALN_DW_TIER0_STORE_STAGES
#define ADALN_DW_TIER0_STORE_STAGES 4
#endif
#ifndef ADALN_DW_STORE_STAGES
#define ADALN_DW_STORE_STAGES 0
#endif
#ifndef ADALN_DW_TIER0_CLUSTER_M
#define ADALN_DW_TIER0_CLUSTER_M 1
#endif
#ifndef ADALN_DW_TIER0_EPI_N
#define ADALN_DW_TIER0_EPI_N 96
#endif
#ifndef ADALN_DW_CLUSTER_N
#define ADALN_DW_CLUSTER_N 1
#endif
#ifndef ADALN_DW_PINGPONG
#define ADALN_DW_PINGPONG true
#endif
#ifndef ADALN_DW_EPI_N
#define ADALN_DW_EPI_N 192
#endif
#ifndef ADALN_DW_DIRECT_STORE
#define ADALN_DW_DIRECT_STORE false
#endif

#define ADALN_STR2(x) #x
#define ADALN_STR(x) ADALN_STR2(x)
#define ADALN_FWD_TIER_TEXT(i) \
  "T<=" ADALN_STR(ADALN_FWD_TIER##i##_MAX) " " ADALN_STR(ADALN_FWD_TIER##i##_TM) "x" ADALN_STR(ADALN_FWD_TIER##i##_TN)
#define ADALN_SM90_CONFIG                                                                                          \
  "fwd tiers (0 = off): " ADALN_FWD_TIER_TEXT(0) "x" ADALN_STR(ADALN_FWD_TIER0_TK) " pp=" ADALN_STR(ADALN_FWD_TIER0_PINGPONG) \
  ", " ADALN_FWD_TIER_TEXT(0B) ", " ADALN_FWD_TIER_TEXT(0C) ", " ADALN_FWD_TIER_TEXT(1) "x" ADALN_STR(ADALN_FWD_TIER1_TK) " pp=" ADALN_STR(ADALN_FWD_TIER1_PINGPONG) ", "          \
  ADALN_FWD_TIER_TEXT(1B) ", " ADALN_FWD_TIER_TEXT(2) ", " ADALN_FWD_TIER_TEXT(3) "; odd tile counts (" ADALN_STR(ADALN_FWD_ODD) ") "      \
  ADALN_STR(ADALN_FWD_ODD_TM) "x" ADALN_STR(ADALN_FWD_ODD_TN) " cluster 1x" ADALN_STR(ADALN_FWD_ODD_CLUSTER_N) "; larger " ADALN_STR(ADALN_FWD_LARGE_TM) "x"                       \
  ADALN_STR(ADALN_FWD_LARGE_TN) " cluster " ADALN_STR(ADALN_FWD_LARGE_CLUSTER_M) "x" ADALN_STR(ADALN_FWD_LARGE_CLUSTER_N) \
  " pp=" ADALN_STR(ADALN_FWD_LARGE_PINGPONG) " epi_n=" ADALN_STR(ADALN_FWD_LARGE_EPI_N) " raster_m=" ADALN_STR(ADALN_FWD_RASTER_ALONG_M) " swizzle=" ADALN_STR(ADALN_FWD_SWIZZLE) \
  "; d_act chunk sums in the GEMM, tiers T<=" ADALN_STR(ADALN_DACT_TIER0_MAX) " 128x" ADALN_STR(ADALN_DACT_TIER0_TN)      \
  ", T<=" ADALN_STR(ADALN_DACT_TIER1_MAX) " 128x" ADALN_STR(ADALN_DACT_TIER1_TN) ", T<=" ADALN_STR(ADALN_DACT_TIER2_MAX)   \
  " 128x" ADALN_STR(ADALN_DACT_TIER2_TN) "; tier clusters fwd " ADALN_STR(ADALN_FWD_TIER0_CLUSTER_M)         \
  ADALN_STR(ADALN_FWD_TIER1_CLUSTER_M) ADALN_STR(ADALN_FWD_TIER2_CLUSTER_M) " d_act " ADALN_STR(ADALN_DACT_TIER0_CLUSTER_M) \
  ADALN_STR(ADALN_DACT_TIER1_CLUSTER_M) ADALN_STR(ADALN_DACT_TIER2_CLUSTER_M) "; larger " ADALN_STR(ADALN_DACT_LARGE_TM) "x" ADALN_STR(ADALN_DACT_LARGE_TN)    \
  " cluster " ADALN_STR(ADALN_DACT_LARGE_CLUSTER_M) "x" ADALN_STR(ADALN_DACT_LARGE_CLUSTER_N) " (k 64), odd tile counts (" ADALN_STR(ADALN_DACT_ODD) ") 1x1; dW "             \
  ADALN_STR(ADALN_DW_TM) "x" ADALN_STR(ADALN_DW_TN) " cluster " ADALN_STR(ADALN_DW_CLUSTER_M) "x"                        \
  ADALN_STR(ADALN_DW_CLUSTER_N) " pp=" ADALN_STR(ADALN_DW_PINGPONG) " direct=" ADALN_STR(ADALN_DW_DIRECT_STORE) " epi_n=" ADALN_STR(ADALN_DW_EPI_N)          \
  " stores " ADALN_STR(ADALN_DW_STORE_STAGES) " (T<=" ADALN_STR(ADALN_DW_TIER0_MAX) ": " ADALN_STR(ADALN_DW_TIER0_TM) "x"      \
  ADALN_STR(ADALN_DW_TIER0_TN) " pp=" ADALN_STR(ADALN_DW_TIER0_PINGPONG) " cluster " ADALN_STR(ADALN_DW_TIER0_CLUSTER_M)   \
  "x1 epi_n=" ADALN_STR(ADALN_DW_TIER0_EPI_N) " stores " ADALN_STR(ADALN_DW_TIER0_STORE_STAGES) ")"                       \
  "; dW on CUDA cores for T<=" ADALN_STR(ADALN_DW_SIMT_MAX) "; d_act T block " ADALN_STR(ADALN_T_BLOCK) "; pdl=" ADALN_STR(ADALN_PDL) " trigger=" ADALN_STR(ADALN_PDL_TRIGGER)
