// The portable path's tile choices, read by portable_gemms.cu (the GEMMs) and api.cu (the config string).
#pragma once

// 0: one tile per GEMM for every T (v2); 1, 2: wider tiles above T = 64 (forward) / T block 64 (d_act), 128x256 or
// 256x128, both with the large tier's stage counts below. Shipped: 2 (the faster of the two in the interleaved H200
// run, git:NOTES.md v3, when tier 1 had 3 forward stages).
#ifndef ADALN_PORTABLE_TIERS
#define ADALN_PORTABLE_TIERS 2
#endif

// A middle tier for 64 < T (or the T block) <= ADALN_PORTABLE_MID_MAX (0 = off): the large tiles are 256 rows of
// T, half empty at T = 128 (the forward there measured 2.5x cuBLAS, 2x its own time at T = 64). Shipped (v7,
// git:NOTES.md "v7 run 8"): up to 128 rows, forward and d_act 128x128x32 (4 warps of 64x64).
#ifndef ADALN_PORTABLE_MID_MAX
#define ADALN_PORTABLE_MID_MAX 128
#endif

// Above the middle tier, a T (or T block) up to ADALN_PORTABLE_ODD_MAX whose count of 128-row tiles is odd (T mod
// 256 in 1..128) takes the middle tier's 128-row tiles (0 = off): the large tier's 256-row tiles would leave up to
// half of the last one empty (v15; at T = 300, 2 tiles of 256 rows against 3 of 128).
#ifndef ADALN_PORTABLE_ODD_MAX
#define ADALN_PORTABLE_ODD_MAX 1048576
#endif

// Pipeline depths (cp.async stages) of each tier's forward and d_act GEMMs, and the small forward tier's warp
// tile rows (64: 4 warps of 64x64; 32: 8 warps of 32x64). None of them touches an element's k-chain (kernel-bench's
// bits check agreed every time). v9 (git:NOTES.md "v9 run 15" to "v9.2 run 17"): forward small 8 warps and 5 stages
// (was 4 warps, 4 stages), middle 5 (was 3), large 4 (was 3); d_act small 8 (was 4), large 4 (was 3).
#ifndef ADALN_PORTABLE_SMALL_FWD_STAGES
#define ADALN_PORTABLE_SMALL_FWD_STAGES 5
#endif
#ifndef ADALN_PORTABLE_SMALL_FWD_WM
#define ADALN_PORTABLE_SMALL_FWD_WM 32
#endif
// The middle tier's warp tile rows (of T) for the forward and d_act: 64 (4 warps of 64x64) or 32 (8 warps of 32x64).
#ifndef ADALN_PORTABLE_MID_FWD_WM
#define ADALN_PORTABLE_MID_FWD_WM 64
#endif
#ifndef ADALN_PORTABLE_MID_DACT_WM
#define ADALN_PORTABLE_MID_DACT_WM 64
#endif
#ifndef ADALN_PORTABLE_MID_FWD_STAGES
#define ADALN_PORTABLE_MID_FWD_STAGES 5
#endif
#ifndef ADALN_PORTABLE_LARGE_FWD_STAGES
#define ADALN_PORTABLE_LARGE_FWD_STAGES 4
#endif
#ifndef ADALN_PORTABLE_SMALL_DACT_STAGES
#define ADALN_PORTABLE_SMALL_DACT_STAGES 8
#endif
#ifndef ADALN_PORTABLE_MID_DACT_STAGES
#define ADALN_PORTABLE_MID_DACT_STAGES 4
#endif
#ifndef ADALN_PORTABLE_LARGE_DACT_STAGES
#define ADALN_PORTABLE_LARGE_DACT_STAGES 4
#endif

// The dW GEMM's tile order (portable_gemms.cu): 0 = the other GEMMs' swizzle, 1 = along D first (v9.1: 4-5 %
// faster at T = 128, within the spread at 256 and 2048).
#ifndef ADALN_PORTABLE_DW_SWIZZLE
#define ADALN_PORTABLE_DW_SWIZZLE 1
#endif
// The dW GEMM's pipeline depth (cp.async stages; K = T is short: 8 k-tiles at T = 256). 3 stages (the depth of
// Triton's best mma.sync dW tile in a one-off sweep) took 0.6-1.5 % off dW alone at T = 256 and nothing off
// forward + backward (git:NOTES.md "v16 run 37"): kept at 4.
#ifndef ADALN_PORTABLE_DW_STAGES
#define ADALN_PORTABLE_DW_STAGES 4
#endif
