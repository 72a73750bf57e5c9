// The forward above the tiers of sm90_fwd.cu: 128 x 96 / 128 / 256 tiles up to 256 rows (sm90_config.h), then
// the large configuration. What the GEMM computes: sm90_fwd.cuh.
#include "sm90_fwd.cuh"

namespace adaln {
namespace fwd {
// Above the tiers: the large configuration or, where its clusters would round the token-tile count up (one
// empty tile column, whose mainloop still runs on zero-filled loads), the odd-count one (sm90_config.h
// ADALN_FWD_ODD). Chosen here, where the large configuration is, so that no tier setting can bypass the tiers.
using LargeConfig = TileConfig<ADALN_FWD_LARGE_TM, ADALN_FWD_LARGE_TN, ADALN_FWD_LARGE_CLUSTER_M,
                               ADALN_FWD_LARGE_PINGPONG, 64, false, ADALN_FWD_LARGE_CLUSTER_N, ADALN_FWD_LARGE_EPI_N>;
using OddConfig = TileConfig<ADALN_FWD_ODD_TM, ADALN_FWD_ODD_TN, 1, false, 64, false, ADALN_FWD_ODD_CLUSTER_N,
                             ADALN_FWD_LARGE_EPI_N>;
struct LargeOrOdd {};
template <>
struct Launch<LargeOrOdd> {
  template <class... Rest>
  static int run(const void* W, const void* act, const void* bias, void* Y, int64_t T, Rest... rest) {
    if constexpr (ADALN_FWD_ODD) {  // off: the odd-count kernel is not compiled
      if (clusters_pad_token_tiles<LargeConfig>(T))
        return Launch<OddConfig>::run(W, act, bias, Y, T, rest...);
    }
    return Launch<LargeConfig>::run(W, act, bias, Y, T, rest...);
  }
};

int wide(const void* W, const void* act, const void* bias, void* Y, int64_t T, int64_t D, int64_t N, int sm_count,
         void* ws, size_t ws_bytes, cudaStream_t stream, Err err) {
  using Tiers = TokenTiers<
      Launch, LargeOrOdd,
      Tier<ADALN_FWD_TIER1B_MAX, TileConfig<ADALN_FWD_TIER1B_TM, ADALN_FWD_TIER1B_TN, 1, false>>,
      Tier<ADALN_FWD_TIER2_MAX, TileConfig<ADALN_FWD_TIER2_TM, ADALN_FWD_TIER2_TN, ADALN_FWD_TIER2_CLUSTER_M, false>>,
      Tier<ADALN_FWD_TIER3_MAX, TileConfig<ADALN_FWD_TIER3_TM, ADALN_FWD_TIER3_TN, 1, false>>>;
  return Tiers::run(T, W, act, bias, Y, T, D, N, sm_count, ws, ws_bytes, stream, err);
}
}  // namespace fwd
}  // namespace adaln
