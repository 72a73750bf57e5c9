// Forward, swap-AB: D[m = output feature, n = token] = sum_k W[m, k] * act[n, k] + b[m].
// W rows sit on wgmma's M side, tokens on its N side, for every T. Epilogue: fma(1, acc, bias) in fp32
// (one fp32 rounding), then one rounding to bf16. The tile follows T's tier (sm90_config.h).
#include "sm90_common.cuh"

namespace adaln {
namespace {
// ElementSource = void: no C term at all (D = bf16(fma(1, acc, bias))), not beta*C with an unloaded C.
using Fusion = cutlass::epilogue::fusion::LinCombPerRowBias<bf16, float, bf16, void, float, 8>;

template <class Config>
struct LaunchFwd {
  using G = Sm90Gemm<Config, cutlass::layout::RowMajor, cutlass::layout::ColumnMajor, bf16,
                     cutlass::layout::ColumnMajor, 8, Fusion>;
  static int run(const void* W, const void* act, const void* bias, void* Y, int64_t T, int64_t D, int64_t N,
                 int sm_count, void* ws, size_t ws_bytes, cudaStream_t stream, Err err) {
    typename G::StrideA sa = make_stride(D, _1{}, int64_t(0));  // W (N, D) row-major: (m, k) -> m*D + k
    typename G::StrideB sb = make_stride(D, _1{}, int64_t(0));  // act (T, D) row-major: (n, k) -> n*D + k
    typename G::StrideD sd = make_stride(_1{}, N, int64_t(0));  // Y (T, N) row-major: (m, n) -> n*N + m
    auto args = G::arguments(cutlass::gemm::GemmUniversalMode::kGemm, N, T, D, 1, W, sa, act, sb, Y, sd, sm_count);
    args.epilogue.thread.bias_ptr = reinterpret_cast<const bf16*>(bias);
    using Raster = cutlass::gemm::kernel::detail::RasterOrderOptions;
    args.scheduler.raster_order = ADALN_FWD_RASTER_ALONG_M ? Raster::AlongM : Raster::AlongN;
    args.scheduler.max_swizzle_size = padless_swizzle<Config>(N, T, ADALN_FWD_SWIZZLE);
    return run_cutlass<typename G::Gemm, G::pdl>(args, ws, ws_bytes, stream, err, "forward GEMM (sm90)");
  }
};

// Above the tiers: the large configuration or, where its clusters would round the token-tile count up (one
// empty tile column, whose mainloop still runs on zero-filled loads), the odd-count one (sm90_config.h
// ADALN_FWD_ODD). Chosen here, where the large configuration is, so that no tier setting can bypass the tiers.
using LargeConfig = TileConfig<ADALN_FWD_LARGE_TM, ADALN_FWD_LARGE_TN, ADALN_FWD_LARGE_CLUSTER_M,
                               ADALN_FWD_LARGE_PINGPONG, 64, false, ADALN_FWD_LARGE_CLUSTER_N, ADALN_FWD_LARGE_EPI_N>;
using OddConfig = TileConfig<ADALN_FWD_ODD_TM, ADALN_FWD_ODD_TN, 1, false, 64, false, ADALN_FWD_ODD_CLUSTER_N,
                             ADALN_FWD_LARGE_EPI_N>;
struct LargeOrOdd {};
template <>
struct LaunchFwd<LargeOrOdd> {
  template <class... Rest>
  static int run(const void* W, const void* act, const void* bias, void* Y, int64_t T, Rest... rest) {
    if constexpr (ADALN_FWD_ODD) {
      if ((T + ADALN_FWD_LARGE_TN - 1) / ADALN_FWD_LARGE_TN % ADALN_FWD_LARGE_CLUSTER_N != 0)
        return LaunchFwd<OddConfig>::run(W, act, bias, Y, T, rest...);
    }
    return LaunchFwd<LargeConfig>::run(W, act, bias, Y, T, rest...);
  }
};
}  // namespace

int gemm_fwd(const void* W, const void* act, const void* bias, void* Y, int64_t T, int64_t D, int64_t N, int sm_count,
             void* ws, size_t ws_bytes, cudaStream_t stream, Err err) {
  using Tiers = TokenTiers<
      LaunchFwd, LargeOrOdd,
      Tier<ADALN_FWD_TIER0_MAX, TileConfig<ADALN_FWD_TIER0_TM, ADALN_FWD_TIER0_TN, ADALN_FWD_TIER0_CLUSTER_M,
                                           ADALN_FWD_TIER0_PINGPONG, ADALN_FWD_TIER0_TK>>,
      Tier<ADALN_FWD_TIER0B_MAX, TileConfig<ADALN_FWD_TIER0B_TM, ADALN_FWD_TIER0B_TN, 1, false, ADALN_FWD_TIER1_TK>>,
      Tier<ADALN_FWD_TIER0C_MAX, TileConfig<ADALN_FWD_TIER0C_TM, ADALN_FWD_TIER0C_TN, 1, false, ADALN_FWD_TIER1_TK>>,
      Tier<ADALN_FWD_TIER1_MAX, TileConfig<ADALN_FWD_TIER1_TM, ADALN_FWD_TIER1_TN, ADALN_FWD_TIER1_CLUSTER_M,
                                           ADALN_FWD_TIER1_PINGPONG, ADALN_FWD_TIER1_TK>>,
      Tier<ADALN_FWD_TIER1B_MAX, TileConfig<ADALN_FWD_TIER1B_TM, ADALN_FWD_TIER1B_TN, 1, false>>,
      Tier<ADALN_FWD_TIER2_MAX, TileConfig<ADALN_FWD_TIER2_TM, ADALN_FWD_TIER2_TN, ADALN_FWD_TIER2_CLUSTER_M, false>>,
      Tier<ADALN_FWD_TIER3_MAX, TileConfig<ADALN_FWD_TIER3_TM, ADALN_FWD_TIER3_TN, 1, false>>>;
  return Tiers::run(T, W, act, bias, Y, T, D, N, sm_count, ws, ws_bytes, stream, err);
}
}  // namespace adaln
