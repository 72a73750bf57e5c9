// d_act partials, swap-AB and batched over fixed K chunks of the N reduction:
// P[c](m = d, n = t) = sum_{k < kchunk} W[c*kchunk + k, d] * dY[t, c*kchunk + k]; fresh fp32 accumulator per chunk.
// The chunking depends only on N. Epilogue: alpha = 1 (exact), fp32 out, no rounding. The tile follows the
// T block's tier (sm90_config.h).
#include "sm90_common.cuh"

namespace adaln {
namespace {
using Fusion = cutlass::epilogue::fusion::LinearCombination<float, float, void, float>;

template <class Config>
struct LaunchDact {
  using G = Sm90Gemm<Config, cutlass::layout::ColumnMajor, cutlass::layout::ColumnMajor, float,
                     cutlass::layout::ColumnMajor, 4, Fusion>;
  static int run(const void* W, const void* dY, float* partial, int64_t Tb, int64_t D, int64_t N, int64_t L,
                 int64_t kchunk, int64_t plane, int sm_count, void* ws, size_t ws_bytes, cudaStream_t stream,
                 Err err) {
    typename G::StrideA sa = make_stride(_1{}, D, kchunk * D);  // (m=d, k=n, l=c) -> W[(c*kchunk + n)*D + d]
    typename G::StrideB sb = make_stride(N, _1{}, kchunk);      // (n=t, k=n, l=c) -> dY[t*N + c*kchunk + n]
    typename G::StrideD sd = make_stride(_1{}, D, plane);       // (m=d, n=t, l=c) -> P[c*plane + t*D + d]
    typename G::Gemm::Arguments args{cutlass::gemm::GemmUniversalMode::kBatched,
                                     {int(D), int(Tb), int(kchunk), int(L)},
                                     {reinterpret_cast<const bf16*>(W), sa, reinterpret_cast<const bf16*>(dY), sb},
                                     {{}, nullptr, sd, partial, sd}};
    args.epilogue.thread.alpha = 1.0f;
    args.epilogue.thread.beta = 0.0f;
    args.hw_info.sm_count = sm_count;
    return run_cutlass<typename G::Gemm>(args, ws, ws_bytes, stream, err, "d_act GEMM (sm90)");
  }
};
}  // namespace

int gemm_dact(const void* W, const void* dY, float* partial, int64_t Tb, int64_t D, int64_t N, int64_t L,
              int64_t kchunk, int64_t plane, int sm_count, void* ws, size_t ws_bytes, cudaStream_t stream, Err err) {
  using Large = TileConfig<ADALN_DACT_LARGE_TM, ADALN_DACT_LARGE_TN, ADALN_DACT_LARGE_CLUSTER_M, false, 64, false,
                           ADALN_DACT_LARGE_CLUSTER_N>;
  return dispatch_token_tiers<LaunchDact, Large>(Tb, W, dY, partial, Tb, D, N, L, kchunk, plane, sm_count, ws, ws_bytes,
                                          stream, err);
}
}  // namespace adaln
