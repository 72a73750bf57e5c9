// dW[n, d] = sum_t dY[t, n] * act[t, d]: K = T, one CTA per output tile looping over all of T in order.
#include "sm90_common.cuh"

namespace adaln {
namespace {
using TileShape = Shape<Int<ADALN_DW_TM>, Int<ADALN_DW_TN>, _64>;
using Fusion = cutlass::epilogue::fusion::LinearCombination<bf16, float, void, float>;
using CollectiveEpilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
    cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
    cutlass::epilogue::collective::EpilogueTileAuto, float, float, void, cutlass::layout::RowMajor, 8, bf16,
    cutlass::layout::RowMajor, 8, EpilogueSchedule, Fusion>::CollectiveOp;
using CollectiveMainloop = typename cutlass::gemm::collective::CollectiveBuilder<
    cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, bf16, cutlass::layout::ColumnMajor, 8, bf16,
    cutlass::layout::RowMajor, 8, float, TileShape, ClusterShape,
    cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(
        sizeof(typename CollectiveEpilogue::SharedStorage))>,
    MainloopSchedule>::CollectiveOp;
using Kernel = cutlass::gemm::kernel::GemmUniversal<Shape<int, int, int, int>, CollectiveMainloop, CollectiveEpilogue,
                                                    cutlass::gemm::PersistentScheduler>;
using Gemm = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;
}  // namespace

int gemm_dw(const void* dY, const void* act, void* dW, int64_t T, int64_t D, int64_t N, int sm_count, void* ws,
            size_t ws_bytes, cudaStream_t stream, Err err) {
  using SA = typename Gemm::GemmKernel::StrideA;
  using SB = typename Gemm::GemmKernel::StrideB;
  using SC = typename Gemm::GemmKernel::StrideC;
  using SD = typename Gemm::GemmKernel::StrideD;
  SA sa = make_stride(_1{}, N, int64_t(0));  // (m=n, k=t) -> dY[t*N + n]
  SB sb = make_stride(_1{}, D, int64_t(0));  // (n=d, k=t) -> act[t*D + d]
  SD sd = make_stride(D, _1{}, int64_t(0));  // (m=n, n=d) -> dW[n*D + d]
  SC sc = sd;
  typename Gemm::Arguments args{cutlass::gemm::GemmUniversalMode::kGemm,
                                {int(N), int(D), int(T), 1},
                                {reinterpret_cast<const bf16*>(dY), sa, reinterpret_cast<const bf16*>(act), sb},
                                {{}, nullptr, sc, reinterpret_cast<bf16*>(dW), sd}};
  args.epilogue.thread.alpha = 1.0f;
  args.epilogue.thread.beta = 0.0f;
  args.hw_info.sm_count = sm_count;
  return run_cutlass<Gemm>(args, ws, ws_bytes, stream, err, "dW GEMM (sm90)");
}
}  // namespace adaln
