// The CUTLASS instantiations behind gemm_3xtf32.cuh (included by the gemm_*.cu files, one layout each, so that
// they compile in parallel).
#pragma once

#include "gemm_3xtf32.cuh"

#include "cutlass/cutlass.h"
#include "cutlass/epilogue/thread/linear_combination.h"
#include "cutlass/gemm/device/gemm_universal.h"
#include "cutlass/gemm/warp/mma_tensor_op_fast_f32.h"

#ifndef TMLP_CHAINED_ACC  // experiment only: CUTLASS's own FastF32 step (every product chained into the running sum)
namespace cutlass {
namespace gemm {
namespace warp {

// The warp-level 3xTF32 step this library uses (more specialised than CUTLASS's FastF32 warp MMA, which it extends
// and which every GEMM here would otherwise get): each 8-wide k step's three products go into a fresh fp32
// accumulator, small terms first (0 + small*big + big*small + big*big, chained in the tensor core), and that step
// sum is added to the running sum with one fp32 add (round to nearest). Chaining every step's products into the
// running sum instead lets the tensor core's accumulation error grow with the length of K (measured on the H200:
// 2-3x the stock path's error on y at K = 1344); this way it behaves like an fp32 FMA chain of K/8 terms.
template <typename Shape_, typename LayoutA_, typename LayoutB_, typename LayoutC_, typename Policy_>
class MmaTensorOpFastF32<Shape_, float, LayoutA_, float, LayoutB_, float, LayoutC_, Policy_, 1, false, bool>
    : public MmaTensorOpFastF32<Shape_, float, LayoutA_, float, LayoutB_, float, LayoutC_, Policy_, 1, false, int> {
  using Base = MmaTensorOpFastF32<Shape_, float, LayoutA_, float, LayoutB_, float, LayoutC_, Policy_, 1, false, int>;

 public:
  using typename Base::FragmentC;
  using typename Base::TransformedFragmentA;
  using typename Base::TransformedFragmentB;
  using typename Base::MmaIterations;

  CUTLASS_DEVICE
  MmaTensorOpFastF32() { pending_.clear(); }

  CUTLASS_DEVICE
  void operator()(FragmentC& D, TransformedFragmentA const& A, TransformedFragmentB const& B,
                  FragmentC const& C) const {
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 800)
    using OpA = typename Base::ArchMmaOperator::FragmentA;
    using OpB = typename Base::ArchMmaOperator::FragmentB;
    using OpC = typename Base::ArchMmaOperator::FragmentC;
    // A and B hold the big parts, then the small parts (TransformedFragment = [big | small]).
    OpA const* a_big = reinterpret_cast<OpA const*>(&A);
    OpA const* a_small = a_big + MmaIterations::kRow;
    OpB const* b_big = reinterpret_cast<OpB const*>(&B);
    OpB const* b_small = b_big + MmaIterations::kColumn;
    D = C;
    OpC* d = reinterpret_cast<OpC*>(&D);
    OpC* p = reinterpret_cast<OpC*>(&pending_);
    ++steps_;
    CUTLASS_PRAGMA_UNROLL
    for (int m = 0; m < MmaIterations::kRow; ++m) {
      CUTLASS_PRAGMA_UNROLL
      for (int n = 0; n < MmaIterations::kColumn; ++n) {
        OpC& t = p[m + n * MmaIterations::kRow];
        this->mma(t, a_small[m], b_big[n], t);
        this->mma(t, a_big[m], b_small[n], t);
        this->mma(t, a_big[m], b_big[n], t);
        if (steps_ == kFoldSteps) {
          OpC& acc = d[m + n * MmaIterations::kRow];
          CUTLASS_PRAGMA_UNROLL
          for (int i = 0; i < OpC::kElements; ++i) acc[i] += t[i];
          t.clear();
        }
      }
    }
    if (steps_ == kFoldSteps) steps_ = 0;
#endif
  }

 private:
  // k steps summed in the tensor core before the fold into the running sum: 1 (each 8-wide step) by default;
  // TMLP_FOLD_STEPS=4 folds once a 32-deep k tile (the calls come 4 a tile, every K a multiple of 32).
#ifndef TMLP_FOLD_STEPS
#define TMLP_FOLD_STEPS 1
#endif
  static constexpr int kFoldSteps = TMLP_FOLD_STEPS;
  mutable FragmentC pending_;
  mutable int steps_ = 0;
};

}  // namespace warp
}  // namespace gemm
}  // namespace cutlass
#endif  // TMLP_CHAINED_ACC

namespace tmlp {
namespace detail {

using Epilogue = cutlass::epilogue::thread::LinearCombination<float, 4, float, float,
                                                              cutlass::epilogue::thread::ScaleType::Nothing>;

// TileK 32 or 16: either way each element's k steps (8 wide) come in ascending order, one chain a warp.
template <class LayoutA, class LayoutB, class LayoutC, int TbM, int TbN, int WarpM, int WarpN, int Stages,
          int TileK = 32>
using Gemm = cutlass::gemm::device::GemmUniversal<
    float, LayoutA, float, LayoutB, float, LayoutC, float, cutlass::arch::OpClassTensorOp, cutlass::arch::Sm80,
    cutlass::gemm::GemmShape<TbM, TbN, TileK>, cutlass::gemm::GemmShape<WarpM, WarpN, TileK>,
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

// The large-T tile, by large_variant() (same bits in each; kept selectable so the device check can time them).
template <class LayoutA, class LayoutB, class LayoutC>
int large(const BatchedGemm& g, cudaStream_t stream, const char** what) {
  switch (large_variant()) {
    case 1:
      return run<Gemm<LayoutA, LayoutB, LayoutC, 128, 64, 32, 32, 4>>(g, stream, what);
    case 2:
      return run<Gemm<LayoutA, LayoutB, LayoutC, 64, 128, 32, 32, 4>>(g, stream, what);
    default:
      return run<Gemm<LayoutA, LayoutB, LayoutC, 128, 128, 32, 64, 3>>(g, stream, what);
  }
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
      return large<LayoutA, Col, Col>(g, stream, what);
    case kWideN:
      return run<Gemm<LayoutA, Col, Col, 64, 128, 32, 32, 4>>(g, stream, what);
    default:
      *what = "config";
      return 1;
  }
}

}  // namespace detail
}  // namespace tmlp
