// Portable path: CUTLASS 2.x GemmUniversal on mma.sync m16n8k16 (sm80 and later: builds for sm_90a and sm_100a).
// Same recipe as the sm90 path: no split-K, forward epilogue fma(1, acc, bias) in fp32 then one bf16 rounding;
// d_act per fixed N-chunk with a fresh accumulator (batched GEMM, fp32 out). Every element is one mma.sync
// chain over k in order, 16 at a time, whatever the tile: the forward and d_act may pick their tile by T
// (ADALN_PORTABLE_TIERS), dW (K = T, only repeatable) has one tile.
#include "cutlass/cutlass.h"
#include "cutlass/epilogue/thread/linear_combination.h"
#include "cutlass/gemm/device/gemm_universal.h"
#include "cutlass/gemm/threadblock/threadblock_swizzle.h"
#include "cutlass_run.cuh"
#include "gemms.h"
#include "portable_config.h"

namespace adaln {
namespace {
using bf16 = cutlass::bfloat16_t;
using RowMajor = cutlass::layout::RowMajor;
using ColumnMajor = cutlass::layout::ColumnMajor;
using Inst = cutlass::gemm::GemmShape<16, 8, 16>;
using Swizzle = cutlass::gemm::threadblock::GemmIdentityThreadblockSwizzle<8>;
template <int M, int N, int K>
using Shape = cutlass::gemm::GemmShape<M, N, K>;

// Forward, M = T, N = N_out, K = D: A = act (T, D) row-major, B = W^T (W row-major (N_out, D) is B column-major),
// C = bias broadcast over rows (ldc = 0, beta = 1), D = Y (T, N_out) row-major.
template <class Block, class Warp, int Stages>
using GemmFwd = cutlass::gemm::device::GemmUniversal<
    bf16, RowMajor, bf16, ColumnMajor, bf16, RowMajor, float, cutlass::arch::OpClassTensorOp, cutlass::arch::Sm80,
    Block, Warp, Inst, cutlass::epilogue::thread::LinearCombination<bf16, 8, float, float>, Swizzle, Stages, 8, 8>;

// d_act partials, M = Tb, N = D, K = chunk, batched over chunks: A = dY block (ld N), B = W chunk (row-major, ld D).
template <class Block, class Warp, int Stages>
using GemmDact = cutlass::gemm::device::GemmUniversal<
    bf16, RowMajor, bf16, RowMajor, float, RowMajor, float, cutlass::arch::OpClassTensorOp, cutlass::arch::Sm80,
    Block, Warp, Inst, cutlass::epilogue::thread::LinearCombination<float, 4, float, float>, Swizzle, Stages, 8, 8>;

// dW, M = N_out, N = D, K = T: A = dY^T (dY row-major (T, N_out) is A column-major), B = act (T, D) row-major.
// Its tile order (ADALN_PORTABLE_DW_SWIZZLE, portable_config.h): 0 = the other GEMMs' (eight tiles along D, then
// down all N_out rows: dW is written in three column bands, one after another), 1 = along D first (whole row
// strips, the order the store benchmark found fast: git:NOTES.md "Store microbenchmark").
#if ADALN_PORTABLE_DW_SWIZZLE
// CUTLASS 2's GemmHorizontalThreadblockSwizzle in the form GemmUniversal calls (a tile offset from log_tile).
struct DwSwizzle {
  CUTLASS_HOST_DEVICE static cutlass::gemm::GemmCoord get_tiled_shape(cutlass::gemm::GemmCoord problem,
                                                                      cutlass::gemm::GemmCoord tile, int split_k) {
    return {(problem.m() + tile.m() - 1) / tile.m(), (problem.n() + tile.n() - 1) / tile.n(), split_k};
  }
  CUTLASS_HOST_DEVICE static dim3 get_grid_shape(cutlass::gemm::GemmCoord tiled) {
    return dim3(tiled.n(), tiled.m(), tiled.k());  // x along N = D: consecutive blocks cross a row strip
  }
  CUTLASS_HOST_DEVICE static int get_log_tile(cutlass::gemm::GemmCoord) { return 0; }
  CUTLASS_DEVICE static cutlass::gemm::GemmCoord get_tile_offset(int) {
    return {cutlass::gemm::threadblock::RematerializeBlockIdxY(), cutlass::gemm::threadblock::RematerializeBlockIdxX(),
            cutlass::gemm::threadblock::RematerializeBlockIdxZ()};
  }
};
#else
using DwSwizzle = Swizzle;
#endif
template <class Block, class Warp, int Stages>
using GemmDw = cutlass::gemm::device::GemmUniversal<
    bf16, ColumnMajor, bf16, RowMajor, bf16, RowMajor, float, cutlass::arch::OpClassTensorOp, cutlass::arch::Sm80,
    Block, Warp, Inst, cutlass::epilogue::thread::LinearCombination<bf16, 8, float, float>, DwSwizzle, Stages, 8, 8>;

using FwdSmall =
    GemmFwd<Shape<64, 256, 32>, Shape<ADALN_PORTABLE_SMALL_FWD_WM, 64, 32>, ADALN_PORTABLE_SMALL_FWD_STAGES>;
using DactSmall = GemmDact<Shape<64, 128, 32>, Shape<32, 64, 32>, ADALN_PORTABLE_SMALL_DACT_STAGES>;
#if ADALN_PORTABLE_TIERS == 1
using FwdLarge = GemmFwd<Shape<128, 256, 32>, Shape<64, 64, 32>, ADALN_PORTABLE_LARGE_FWD_STAGES>;
using DactLarge = GemmDact<Shape<128, 128, 32>, Shape<64, 64, 32>, ADALN_PORTABLE_LARGE_DACT_STAGES>;
#elif ADALN_PORTABLE_TIERS == 2
using FwdLarge = GemmFwd<Shape<256, 128, 32>, Shape<64, 64, 32>, ADALN_PORTABLE_LARGE_FWD_STAGES>;
using DactLarge = GemmDact<Shape<256, 128, 32>, Shape<64, 64, 32>, ADALN_PORTABLE_LARGE_DACT_STAGES>;
#endif
// The middle tier (portable_config.h) for 64 < T (or the T block) <= ADALN_PORTABLE_MID_MAX.
#ifndef ADALN_PORTABLE_MID_FWD_TN
#define ADALN_PORTABLE_MID_FWD_TN 128
#endif
#if ADALN_PORTABLE_MID_MAX > 0
using FwdMid = GemmFwd<Shape<128, ADALN_PORTABLE_MID_FWD_TN, 32>, Shape<ADALN_PORTABLE_MID_FWD_WM, 64, 32>,
                      ADALN_PORTABLE_MID_FWD_STAGES>;
using DactMid = GemmDact<Shape<128, 128, 32>, Shape<ADALN_PORTABLE_MID_DACT_WM, 64, 32>,
                        ADALN_PORTABLE_MID_DACT_STAGES>;
#endif
// dW above ADALN_DW_MMA_MAX rows (api.cu; below it dw_mma.cu): 128x128 for every T (the H200 run with 128x256
// was slower at T <= 64 and equal at 2048; smaller tiles with more CTAs per SM were slower at T = 16 to 256:
// git:NOTES.md, "v7 run 6").
using Dw = GemmDw<Shape<128, 128, 32>, Shape<64, 64, 32>, ADALN_PORTABLE_DW_STAGES>;

// Whether T (or the T block) takes the middle tier's tile (portable_config.h): up to its bound, and above it where
// the large tier's 256-row tiles would pad an odd count of 128-row tiles.
bool middle_tier(int64_t t) {
  if (t <= 64 || ADALN_PORTABLE_MID_MAX == 0) return false;
  return t <= ADALN_PORTABLE_MID_MAX || (t <= ADALN_PORTABLE_ODD_MAX && (t + 127) / 128 % 2 == 1);
}

template <class Gemm>
int fwd(const void* W, const void* act, const void* bias, void* Y, int64_t T, int64_t D, int64_t N, void* ws,
        size_t ws_bytes, cudaStream_t stream, Err err) {
  typename Gemm::Arguments args(cutlass::gemm::GemmUniversalMode::kGemm, {int(T), int(N), int(D)}, 1, {1.0f, 1.0f},
                                act, W, bias, Y, 0, 0, 0, 0, D, D, 0, N);
  return run_cutlass<Gemm>(args, ws, ws_bytes, stream, err, "forward GEMM (portable)");
}

template <class Gemm>
int dact(const void* W, const void* dY, float* partial, int64_t Tb, int64_t D, int64_t N, int64_t L, int64_t kchunk,
         int64_t plane, void* ws, size_t ws_bytes, cudaStream_t stream, Err err) {
  typename Gemm::Arguments args(cutlass::gemm::GemmUniversalMode::kBatched, {int(Tb), int(D), int(kchunk)}, int(L),
                                {1.0f, 0.0f}, dY, W, partial, partial, kchunk, kchunk * D, plane, plane, N, D, D, D);
  return run_cutlass<Gemm>(args, ws, ws_bytes, stream, err, "d_act GEMM (portable)");
}
}  // namespace

int gemm_fwd(const void* W, const void* act, const void* bias, void* Y, int64_t T, int64_t D, int64_t N, int sm_count,
             void* ws, size_t ws_bytes, cudaStream_t stream, Err err) {
  (void)sm_count;
#if ADALN_PORTABLE_MID_MAX > 0
  if (middle_tier(T)) return fwd<FwdMid>(W, act, bias, Y, T, D, N, ws, ws_bytes, stream, err);
#endif
#if ADALN_PORTABLE_TIERS
  if (T > 64) return fwd<FwdLarge>(W, act, bias, Y, T, D, N, ws, ws_bytes, stream, err);
#endif
  return fwd<FwdSmall>(W, act, bias, Y, T, D, N, ws, ws_bytes, stream, err);
}

// mma.sync accumulates in registers with no promotion step: one chunk per batch (api.cu folds the chunks).
const bool kSumsInGemm = false;

int gemm_dact(const void* W, const void* dY, float* partial, int64_t Tb, int64_t D, int64_t N, int64_t L, int64_t klen,
              int64_t kchunk, int64_t plane, int sm_count, void* ws, size_t ws_bytes, cudaStream_t stream, Err err) {
  (void)sm_count;
  if (klen > kchunk) {
    set_err(err, "d_act GEMM (portable): a K range of %lld holds more than one chunk of %lld", (long long)klen,
            (long long)kchunk);
    return ADALN_BAD_ARGUMENT;
  }
#if ADALN_PORTABLE_MID_MAX > 0
  if (middle_tier(Tb)) return dact<DactMid>(W, dY, partial, Tb, D, N, L, klen, plane, ws, ws_bytes, stream, err);
#endif
#if ADALN_PORTABLE_TIERS
  if (Tb > 64) return dact<DactLarge>(W, dY, partial, Tb, D, N, L, klen, plane, ws, ws_bytes, stream, err);
#endif
  return dact<DactSmall>(W, dY, partial, Tb, D, N, L, klen, plane, ws, ws_bytes, stream, err);
}

int gemm_dw(const void* dY, const void* act, void* dW, int64_t T, int64_t D, int64_t N, int sm_count, void* ws,
            size_t ws_bytes, cudaStream_t stream, Err err) {
  (void)sm_count;
  typename Dw::Arguments args(cutlass::gemm::GemmUniversalMode::kGemm, {int(N), int(D), int(T)}, 1, {1.0f, 0.0f}, dY,
                              act, dW, dW, 0, 0, 0, 0, N, D, D, D);
  return run_cutlass<Dw>(args, ws, ws_bytes, stream, err, "dW GEMM (portable)");
}
}  // namespace adaln
