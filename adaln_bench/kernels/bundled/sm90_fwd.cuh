// Forward, swap-AB: D[m = output feature, n = token] = sum_k W[m, k] * act[n, k] + b[m].
// W rows sit on wgmma's M side, tokens on its N side, for every T. Epilogue: fma(1, acc, bias) in fp32
// (one fp32 rounding), then one rounding to bf16. The tile follows T's tier (sm90_config.h). The tiers live in
// two translation units so that the build's compilers share them: sm90_fwd.cu up to 64 rows (and the entry
// point), sm90_fwd_wide.cu above.
#pragma once
#include "sm90_common.cuh"

namespace adaln {
namespace fwd {
// ElementSource = void: no C term at all (D = bf16(fma(1, acc, bias))), not beta*C with an unloaded C.
using Fusion = cutlass::epilogue::fusion::LinCombPerRowBias<bf16, float, bf16, void, float, 8>;

template <class Config>
struct Launch {
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

// The forward for a T that no tier of sm90_fwd.cu took: tiers 1B to 3, then the large configuration.
int wide(const void* W, const void* act, const void* bias, void* Y, int64_t T, int64_t D, int64_t N, int sm_count,
         void* ws, size_t ws_bytes, cudaStream_t stream, Err err);
}  // namespace fwd
}  // namespace adaln
