// The forward's tiers up to 64 rows (128 x 16 / 32 / 48 / 64 tiles, sm90_config.h) and its entry point; above
// them sm90_fwd_wide.cu. What the GEMM computes: sm90_fwd.cuh.
#include "sm90_fwd.cuh"

namespace adaln {
namespace fwd {
struct Wide {};
template <>
struct Launch<Wide> {
  template <class... Args>
  static int run(Args... args) {
    return wide(args...);
  }
};
}  // namespace fwd

int gemm_fwd(const void* W, const void* act, const void* bias, void* Y, int64_t T, int64_t D, int64_t N, int sm_count,
             void* ws, size_t ws_bytes, cudaStream_t stream, Err err) {
  using Tiers = TokenTiers<
      fwd::Launch, fwd::Wide,
      Tier<ADALN_FWD_TIER0_MAX, TileConfig<ADALN_FWD_TIER0_TM, ADALN_FWD_TIER0_TN, ADALN_FWD_TIER0_CLUSTER_M,
                                           ADALN_FWD_TIER0_PINGPONG, ADALN_FWD_TIER0_TK>>,
      Tier<ADALN_FWD_TIER0B_MAX, TileConfig<ADALN_FWD_TIER0B_TM, ADALN_FWD_TIER0B_TN, 1, false, ADALN_FWD_TIER1_TK>>,
      Tier<ADALN_FWD_TIER0C_MAX, TileConfig<ADALN_FWD_TIER0C_TM, ADALN_FWD_TIER0C_TN, 1, false, ADALN_FWD_TIER1_TK>>,
      Tier<ADALN_FWD_TIER1_MAX, TileConfig<ADALN_FWD_TIER1_TM, ADALN_FWD_TIER1_TN, ADALN_FWD_TIER1_CLUSTER_M,
                                           ADALN_FWD_TIER1_PINGPONG, ADALN_FWD_TIER1_TK>>>;
  return Tiers::run(T, W, act, bias, Y, T, D, N, sm_count, ws, ws_bytes, stream, err);
}
}  // namespace adaln
