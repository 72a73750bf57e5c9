// dW[n, d] = sum_t dY[t, n] * act[t, d]: K = T, one CTA per output tile looping over all of T in order.
// dW sums over T, so it is only ever compared with itself (repeatable): its tile may follow T freely. Up to
// ADALN_DW_TIER0_MAX rows one CTA per tile (at small T the act tile is a few rows: sharing it gains nothing);
// above, clusters along M share the act tile through TMA multicast (sm90_config.h).
#include "sm90_common.cuh"

namespace adaln {
namespace {
using Fusion = cutlass::epilogue::fusion::LinearCombination<bf16, float, void, float>;

template <class Config>
struct LaunchDw {
  using G = Sm90Gemm<Config, cutlass::layout::ColumnMajor, cutlass::layout::RowMajor, bf16, cutlass::layout::RowMajor,
                     8, Fusion>;
  static int run(const void* dY, const void* act, void* dW, int64_t T, int64_t D, int64_t N, int sm_count, void* ws,
                 size_t ws_bytes, cudaStream_t stream, Err err) {
    typename G::StrideA sa = make_stride(_1{}, N, int64_t(0));  // (m=n, k=t) -> dY[t*N + n]
    typename G::StrideB sb = make_stride(_1{}, D, int64_t(0));  // (n=d, k=t) -> act[t*D + d]
    typename G::StrideD sd = make_stride(D, _1{}, int64_t(0));  // (m=n, n=d) -> dW[n*D + d]
    auto args = G::arguments(cutlass::gemm::GemmUniversalMode::kGemm, N, D, T, 1, dY, sa, act, sb, dW, sd, sm_count);
    return run_cutlass<typename G::Gemm, G::pdl>(args, ws, ws_bytes, stream, err, "dW GEMM (sm90)");
  }
};

template <int TM, int TN, int ClusterM, bool Pingpong, int ClusterN, int EpiN, int StoreStages>
using DwConfig = TileConfig<TM, TN, ClusterM, Pingpong, 64, ADALN_DW_DIRECT_STORE, ClusterN, EpiN, StoreStages>;
}  // namespace

int gemm_dw(const void* dY, const void* act, void* dW, int64_t T, int64_t D, int64_t N, int sm_count, void* ws,
            size_t ws_bytes, cudaStream_t stream, Err err) {
  using Tiers =
      TokenTiers<LaunchDw,
                 DwConfig<ADALN_DW_TM, ADALN_DW_TN, ADALN_DW_CLUSTER_M, ADALN_DW_PINGPONG, ADALN_DW_CLUSTER_N,
                          ADALN_DW_EPI_N, ADALN_DW_STORE_STAGES>,
                 Tier<ADALN_DW_TIER0_MAX, DwConfig<ADALN_DW_TIER0_TM, ADALN_DW_TIER0_TN, ADALN_DW_TIER0_CLUSTER_M,
                                                   ADALN_DW_TIER0_PINGPONG, 1, ADALN_DW_TIER0_EPI_N,
                                                   ADALN_DW_TIER0_STORE_STAGES>>>;
  return Tiers::run(T, dY, act, dW, T, D, N, sm_count, ws, ws_bytes, stream, err);
}
}  // namespace adaln
