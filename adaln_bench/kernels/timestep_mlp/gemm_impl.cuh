// The CUTLASS instantiations behind gemm_3xtf32.cuh (included by the gemm_*.cu files, one layout each, so that
// they compile in parallel).
#pragma once

#include "gemm_3xtf32.cuh"

#include "cutlass/cutlass.h"
#include "cutlass/epilogue/thread/linear_combination.h"
#include "cutlass/gemm/device/gemm_universal.h"

namespace tmlp {
namespace detail {

using Epilogue = cutlass::epilogue::thread::LinearCombination<float, 4, float, float,
                                                              cutlass::epilogue::thread::ScaleType::Nothing>;

template <class LayoutA, class LayoutB, class LayoutC, int TbM, int TbN, int WarpM, int WarpN, int Stages>
using Gemm = cutlass::gemm::device::GemmUniversal<
    float, LayoutA, float, LayoutB, float, LayoutC, float, cutlass::arch::OpClassTensorOp, cutlass::arch::Sm80,
    cutlass::gemm::GemmShape<TbM, TbN, 32>, cutlass::gemm::GemmShape<WarpM, WarpN, 32>,
    cutlass::gemm::GemmShape<16, 8, 8>, Epilogue, cutlass::gemm::threadblock::GemmIdentityThreadblockSwizzle<>,
    Stages, 4, 4, cutlass::arch::OpMultiplyAddFastF32>;

template <class G>
int run(const BatchedGemm& g, cudaStream_t stream, const char** what) {
  typename G::Arguments args(
      g.batches > 1 ? cutlass::gemm::GemmUniversalMode::kBatched : cutlass::gemm::GemmUniversalMode::kGemm,
      cutlass::gemm::GemmCoord(g.m, g.n, g.k), g.batches, typename Epilogue::Params(), g.a, g.b, g.d, g.d,
      g.stride_a, g.stride_b, g.stride_d, g.stride_d, g.lda, g.ldb, g.ldd, g.ldd);
  G op;
  cutlass::Status st = G::can_implement(args);
  if (st != cutlass::Status::kSuccess) {
    *what = "can_implement";
    return static_cast<int>(st) == 0 ? 1 : static_cast<int>(st);
  }
  st = op.initialize(args, nullptr, stream);
  if (st != cutlass::Status::kSuccess) {
    *what = "initialize";
    return static_cast<int>(st) == 0 ? 1 : static_cast<int>(st);
  }
  st = op.run(stream);
  if (st != cutlass::Status::kSuccess) {
    *what = "run";
    cudaError_t e = cudaGetLastError();
    return e != cudaSuccess ? 1000 + static_cast<int>(e) : static_cast<int>(st);
  }
  return 0;
}

template <class LayoutA>
int row_gemm(int config, const BatchedGemm& g, cudaStream_t stream, const char** what) {
  using Col = cutlass::layout::ColumnMajor;
  switch (config) {
    case kSmallN:
      return run<Gemm<LayoutA, Col, Col, 64, 32, 32, 16, 6>>(g, stream, what);
    case kMidN:
      return run<Gemm<LayoutA, Col, Col, 64, 64, 32, 32, 4>>(g, stream, what);
    case kLargeN:
      return run<Gemm<LayoutA, Col, Col, 128, 128, 32, 64, 3>>(g, stream, what);
    default:
      *what = "config";
      return 1;
  }
}

}  // namespace detail
}  // namespace tmlp
