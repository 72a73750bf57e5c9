// Forward, swap-AB: D[m = output feature, n = token] = sum_k W[m, k] * act[n, k] + b[m].
// W rows sit on wgmma's M side, tokens on its N side, for every T. Epilogue: fma(1, acc, bias) in fp32
// (one fp32 rounding), then one rounding to bf16.
#include "sm90_common.cuh"

namespace adaln {
namespace {
using ElementD = bf16;
// ElementSource = void: no C term at all (D = bf16(fma(1, acc, bias))), not beta*C with an unloaded C.
using Fusion = cutlass::epilogue::fusion::LinCombPerRowBias<ElementD, float, bf16, void, float, 8>;

template <class TileShape>
struct FwdGemm {
  using CollectiveEpilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
      cutlass::epilogue::collective::EpilogueTileAuto, float, float, void, cutlass::layout::ColumnMajor, 8, ElementD,
      cutlass::layout::ColumnMajor, 8, EpilogueSchedule, Fusion>::CollectiveOp;
  using CollectiveMainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, bf16, cutlass::layout::RowMajor, 8, bf16,
      cutlass::layout::ColumnMajor, 8, float, TileShape, ClusterShape,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(
          sizeof(typename CollectiveEpilogue::SharedStorage))>,
      MainloopSchedule>::CollectiveOp;
  using Kernel = cutlass::gemm::kernel::GemmUniversal<Shape<int, int, int, int>, CollectiveMainloop,
                                                      CollectiveEpilogue, cutlass::gemm::PersistentScheduler>;
  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;
};

template <class Gemm>
int launch_fwd(const void* W, const void* act, const void* bias, void* Y, int64_t T, int64_t D, int64_t N,
               int sm_count, void* ws, size_t ws_bytes, cudaStream_t stream, Err err) {
  using SA = typename Gemm::GemmKernel::StrideA;
  using SB = typename Gemm::GemmKernel::StrideB;
  using SC = typename Gemm::GemmKernel::StrideC;
  using SD = typename Gemm::GemmKernel::StrideD;
  SA sa = make_stride(D, _1{}, int64_t(0));   // W (N, D) row-major: (m, k) -> m*D + k
  SB sb = make_stride(D, _1{}, int64_t(0));   // act (T, D) row-major: (n, k) -> n*D + k
  SD sd = make_stride(_1{}, N, int64_t(0));   // Y (T, N) row-major: (m, n) -> n*N + m
  SC sc = sd;
  typename Gemm::Arguments args{cutlass::gemm::GemmUniversalMode::kGemm,
                                {int(N), int(T), int(D), 1},
                                {reinterpret_cast<const bf16*>(W), sa, reinterpret_cast<const bf16*>(act), sb},
                                {{}, nullptr, sc, reinterpret_cast<bf16*>(Y), sd}};
  args.epilogue.thread.alpha = 1.0f;
  args.epilogue.thread.beta = 0.0f;
  args.epilogue.thread.bias_ptr = reinterpret_cast<const bf16*>(bias);
  args.hw_info.sm_count = sm_count;
  args.scheduler.raster_order = cutlass::gemm::kernel::detail::RasterOrderOptions::AlongN;
  return run_cutlass<Gemm>(args, ws, ws_bytes, stream, err, "forward GEMM (sm90)");
}
}  // namespace

int gemm_fwd(const void* W, const void* act, const void* bias, void* Y, int64_t T, int64_t D, int64_t N, int sm_count,
             void* ws, size_t ws_bytes, cudaStream_t stream, Err err) {
#if ADALN_SMALL_T_MAX > 0
  if (T <= ADALN_SMALL_T_MAX)
    return launch_fwd<typename FwdGemm<Shape<Int<ADALN_FWD_TM>, Int<ADALN_SMALL_TN>, _64>>::Gemm>(
        W, act, bias, Y, T, D, N, sm_count, ws, ws_bytes, stream, err);
#endif
  return launch_fwd<typename FwdGemm<Shape<Int<ADALN_FWD_TM>, Int<ADALN_FWD_TN>, _64>>::Gemm>(
      W, act, bias, Y, T, D, N, sm_count, ws, ws_bytes, stream, err);
}
}  // namespace adaln
