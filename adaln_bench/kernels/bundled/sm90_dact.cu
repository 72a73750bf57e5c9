// d_act partials, swap-AB and batched over fixed K chunks of the N reduction:
// P[c](m = d, n = t) = sum_{k < kchunk} W[c*kchunk + k, d] * dY[t, c*kchunk + k]; fresh fp32 accumulator per chunk.
// The chunking depends only on N. Epilogue: alpha = 1 (exact), fp32 out, no rounding.
#include "sm90_common.cuh"

namespace adaln {
namespace {
using Fusion = cutlass::epilogue::fusion::LinearCombination<float, float, void, float>;

template <class TileShape>
struct DactGemm {
  using CollectiveEpilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
      cutlass::epilogue::collective::EpilogueTileAuto, float, float, void, cutlass::layout::ColumnMajor, 4, float,
      cutlass::layout::ColumnMajor, 4, EpilogueSchedule, Fusion>::CollectiveOp;
  using CollectiveMainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, bf16, cutlass::layout::ColumnMajor, 8, bf16,
      cutlass::layout::ColumnMajor, 8, float, TileShape, ClusterShape,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(
          sizeof(typename CollectiveEpilogue::SharedStorage))>,
      MainloopSchedule>::CollectiveOp;
  using Kernel = cutlass::gemm::kernel::GemmUniversal<Shape<int, int, int, int>, CollectiveMainloop,
                                                      CollectiveEpilogue, cutlass::gemm::PersistentScheduler>;
  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;
};

template <class Gemm>
int launch_dact(const void* W, const void* dY, float* partial, int64_t Tb, int64_t D, int64_t N, int64_t L,
                int64_t kchunk, int64_t plane, int sm_count, void* ws, size_t ws_bytes, cudaStream_t stream, Err err) {
  using SA = typename Gemm::GemmKernel::StrideA;
  using SB = typename Gemm::GemmKernel::StrideB;
  using SC = typename Gemm::GemmKernel::StrideC;
  using SD = typename Gemm::GemmKernel::StrideD;
  SA sa = make_stride(_1{}, D, kchunk * D);  // (m=d, k=n, l=c) -> W[(c*kchunk + n)*D + d]
  SB sb = make_stride(N, _1{}, kchunk);      // (n=t, k=n, l=c) -> dY[t*N + c*kchunk + n]
  SD sd = make_stride(_1{}, D, plane);       // (m=d, n=t, l=c) -> P[c*plane + t*D + d]
  SC sc = sd;
  typename Gemm::Arguments args{cutlass::gemm::GemmUniversalMode::kBatched,
                                {int(D), int(Tb), int(kchunk), int(L)},
                                {reinterpret_cast<const bf16*>(W), sa, reinterpret_cast<const bf16*>(dY), sb},
                                {{}, nullptr, sc, partial, sd}};
  args.epilogue.thread.alpha = 1.0f;
  args.epilogue.thread.beta = 0.0f;
  args.hw_info.sm_count = sm_count;
  return run_cutlass<Gemm>(args, ws, ws_bytes, stream, err, "d_act GEMM (sm90)");
}
}  // namespace

int gemm_dact(const void* W, const void* dY, float* partial, int64_t Tb, int64_t D, int64_t N, int64_t L,
              int64_t kchunk, int64_t plane, int sm_count, void* ws, size_t ws_bytes, cudaStream_t stream, Err err) {
#if ADALN_SMALL_T_MAX > 0
  if (Tb <= ADALN_SMALL_T_MAX)
    return launch_dact<typename DactGemm<Shape<Int<ADALN_DACT_TM>, Int<ADALN_SMALL_TN>, _64>>::Gemm>(
        W, dY, partial, Tb, D, N, L, kchunk, plane, sm_count, ws, ws_bytes, stream, err);
#endif
  return launch_dact<typename DactGemm<Shape<Int<ADALN_DACT_TM>, Int<ADALN_DACT_TN>, _64>>::Gemm>(
      W, dY, partial, Tb, D, N, L, kchunk, plane, sm_count, ws, ws_bytes, stream, err);
}
}  // namespace adaln
