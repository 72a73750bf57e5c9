// d_act chunk sums, swap-AB and batched over groups of whole chunks of the N reduction:
// S[l](m = d, n = t) = ((0 + P_0) + P_1) + ..., P_j = sum_{k < kchunk} W[n_j + k, d] * dY[t, n_j + k] over the
// chunks j of batch l's K range [l * klen, l * klen + klen) (the last chunk may be shorter), each P_j a fresh
// tensor-core accumulation in k order, added into the fp32 sum by the mainloop (sm90_common.cuh `ChunkSummed`).
// The chunking and grouping depend only on N. Epilogue: alpha = 1 (exact), fp32 out, no rounding. The tile
// follows the T block's tier (sm90_config.h); the k-tile is 64 everywhere (a chunk is a whole number of them).
#include "sm90_common.cuh"

namespace adaln {
namespace {
using Fusion = cutlass::epilogue::fusion::LinearCombination<float, float, void, float>;
constexpr int kMmaK = 16;  // K of one wgmma: the promotion interval counts these

template <class Config>
struct LaunchDact {
  using G = Sm90Gemm<Config, cutlass::layout::ColumnMajor, cutlass::layout::ColumnMajor, float,
                     cutlass::layout::ColumnMajor, 4, Fusion, /*ChunkSums=*/true>;
  static int run(const void* W, const void* dY, float* sums, int64_t Tb, int64_t D, int64_t N, int64_t L,
                 int64_t klen, int64_t kchunk, int64_t plane, int sm_count, void* ws, size_t ws_bytes,
                 cudaStream_t stream, Err err) {
    typename G::StrideA sa = make_stride(_1{}, D, klen * D);  // (m=d, k=n, l) -> W[(l*klen + n)*D + d]
    typename G::StrideB sb = make_stride(N, _1{}, klen);      // (n=t, k=n, l) -> dY[t*N + l*klen + n]
    typename G::StrideD sd = make_stride(_1{}, D, plane);     // (m=d, n=t, l) -> S[l*plane + t*D + d]
    auto args = G::arguments(cutlass::gemm::GemmUniversalMode::kBatched, D, Tb, klen, L, W, sa, dY, sb, sums, sd,
                             sm_count);
    args.mainloop.mma_promotion_interval = uint32_t(kchunk / kMmaK);
    return run_cutlass<typename G::Gemm, G::pdl>(args, ws, ws_bytes, stream, err, "d_act GEMM (sm90)");
  }
};

// Above the tiers: the large configuration or, where its clusters would round the token-tile count up (an empty
// tile column whose mainloop still runs on zero-filled loads), the same tile without clusters (ADALN_DACT_ODD).
using LargeConfig = TileConfig<ADALN_DACT_LARGE_TM, ADALN_DACT_LARGE_TN, ADALN_DACT_LARGE_CLUSTER_M, false, 64, false,
                               ADALN_DACT_LARGE_CLUSTER_N>;
using OddConfig = TileConfig<ADALN_DACT_LARGE_TM, ADALN_DACT_LARGE_TN, ADALN_DACT_LARGE_CLUSTER_M, false, 64>;
struct LargeOrOdd {};
template <>
struct LaunchDact<LargeOrOdd> {
  template <class... Rest>
  static int run(const void* W, const void* dY, float* sums, int64_t Tb, Rest... rest) {
    if constexpr (ADALN_DACT_ODD) {  // off: the odd-count kernel is not compiled
      if (clusters_pad_token_tiles<LargeConfig>(Tb))
        return LaunchDact<OddConfig>::run(W, dY, sums, Tb, rest...);
    }
    return LaunchDact<LargeConfig>::run(W, dY, sums, Tb, rest...);
  }
};
}  // namespace

const bool kSumsInGemm = true;

int gemm_dact(const void* W, const void* dY, float* sums, int64_t Tb, int64_t D, int64_t N, int64_t L, int64_t klen,
              int64_t kchunk, int64_t plane, int sm_count, void* ws, size_t ws_bytes, cudaStream_t stream, Err err) {
  if (kchunk % 64 != 0) {
    set_err(err, "d_act GEMM (sm90): chunk length %lld is not a multiple of the 64-wide k-tile", (long long)kchunk);
    return ADALN_BAD_ARGUMENT;
  }
  using Tiers = TokenTiers<
      LaunchDact, LargeOrOdd,
      Tier<ADALN_DACT_TIER0_MAX, TileConfig<128, ADALN_DACT_TIER0_TN, ADALN_DACT_TIER0_CLUSTER_M, false, 64>>,
      Tier<ADALN_DACT_TIER1_MAX, TileConfig<128, ADALN_DACT_TIER1_TN, ADALN_DACT_TIER1_CLUSTER_M, false, 64>>,
      Tier<ADALN_DACT_TIER2_MAX, TileConfig<128, ADALN_DACT_TIER2_TN, ADALN_DACT_TIER2_CLUSTER_M, false, 64>>>;
  return Tiers::run(Tb, W, dY, sums, Tb, D, N, L, klen, kchunk, plane, sm_count, ws, ws_bytes, stream, err);
}
}  // namespace adaln
