// 3xTF32 GEMMs of the timestep MLP on mma.sync m16n8k8 (CUTLASS 2.x GemmUniversal, OpMultiplyAddFastF32).
//
// Each fp32 operand x is split once into big = rna_tf32(x) and small = rna_tf32(x - big) (rounded, not truncated:
// the specialisation below replaces CUTLASS's default truncated big part in this library only), and every 8-wide
// k step sums small*big, big*small, then big*big in a fresh fp32 accumulator that is then added to the running
// sum (gemm_impl.cuh). An output element's bits are
// a function of its own row and column operands and of that k-step sequence only; the sequence is k ascending in
// steps of 8 (threadblock k = warp k = 32, one warp partition along k), identical for every tile shape below, so the
// tile shape may follow T without changing any element's bits.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

#include "cutlass/numeric_conversion.h"

namespace cutlass {

// The converter the FastF32 warp MMA instantiates (big: round_toward_zero, small: round_half_ulp_truncate by its
// defaults), specialised before any GEMM is instantiated: both parts rounded to nearest (ties away), so big + small
// carries x to 2^-22 relative and the dropped small*small term is below 2^-22 of the product.
template <>
struct NumericConverterFastF32<FloatRoundStyle::round_toward_zero, FloatRoundStyle::round_half_ulp_truncate> {
  using result_type = Array<tfloat32_t, 2>;
  using source_type = float;
  static FloatRoundStyle const kRoundBig = FloatRoundStyle::round_to_nearest;
  static FloatRoundStyle const kRoundSmall = FloatRoundStyle::round_to_nearest;

  CUTLASS_HOST_DEVICE static result_type convert(source_type const& s) {
    result_type r;
#if defined(__CUDA_ARCH__)
    uint32_t big, small;
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(big) : "f"(s));
    float const rest = s - __uint_as_float(big);
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(small) : "f"(rest));
    r[0] = tfloat32_t::bitcast(big);
    r[1] = tfloat32_t::bitcast(small);
#else
    r[0] = tfloat32_t::round_half_ulp_truncate(s);
    r[1] = tfloat32_t::round_half_ulp_truncate(s - static_cast<float>(r[0]));
#endif
    return r;
  }

  CUTLASS_HOST_DEVICE result_type operator()(source_type const& s) const { return convert(s); }
};

}  // namespace cutlass

namespace tmlp {

// Tile configurations (threadblock M x N; k = 32 always). The row GEMMs put the weights on M and the T rows on N.
enum GemmConfig : int {
  kSmallN = 0,  // 64 x 32, 4 warps of 32 x 16, 6 stages: T <= 32 (weight-bandwidth bound; many CTAs)
  kMidN = 1,    // 64 x 64, 4 warps of 32 x 32, 4 stages: T <= 128
  kLargeN = 2,  // 128 x 128, 8 warps of 32 x 64, 3 stages: T > 1024 (tensor-core bound)
  kWideN = 3,   // 64 x 128, 8 warps of 32 x 32, 4 stages: 128 < T <= 1024 (no register spills; more CTAs)
  kStream = 4,  // not CUTLASS: row_stream.cu's weight-streaming kernel (16 x 8..32 a warp), same bits: small T
};
// Not used: an N tile of 8 (64 x 8, warps of 32 x 8; it compiles for the forward's row-major weight only) gave other
// bits than these three on the H200 (CUTLASS lays such a tile's k out otherwise in shared memory, so each mma's 8 k
// values differ), and was slower at T = 1 than the 64 x 32 tile. A k tile of 16 also gave other bits.

// One batched launch: batch b computes D_b (M x N, column-major, ldd) = A_b (M x K) * B_b (K x N, column-major,
// ldb), A row-major ("tn") or column-major ("nn"), each batch's pointers advanced by its stride (elements). The
// batches are fixed K slices of one product (split-K with a slice count fixed by the shape; folded by the caller).
struct BatchedGemm {
  int m, n, k, batches;
  const float* a;
  int64_t lda, stride_a;
  const float* b;
  int64_t ldb, stride_b;
  float* d;
  int64_t ldd, stride_d;
};

// The large-T tile: 0 (default) 128 x 128 x 32, 8 warps of 32 x 64, 3 stages; 1 128 x 64 x 32 and 2 64 x 128 x 32,
// 8 warps of 32 x 32, 4 stages. (A k tile of 16 gives other bits: the tile's k depth is part of the contract.) Same bits in each. Process-wide (mlp.cu's tmlp_set_large_variant).
int large_variant();

// Return 0 on success, else a CUTLASS status (>= 1) or 1000 + a cudaError_t; `what` names the failing step.
int gemm_tn(int config, const BatchedGemm& g, cudaStream_t stream, const char** what);
int gemm_nn(int config, const BatchedGemm& g, cudaStream_t stream, const char** what);
// Weight gradients: D (M x N, row-major, ldd) = A (M x K, column-major, lda) * B (K x N, row-major, ldb), K = T.
int gemm_dw(const BatchedGemm& g, cudaStream_t stream, const char** what);

// The row GEMM of gemm_tn / gemm_nn (weight row-major, or transposed) by row_stream.cu's weight-streaming kernel,
// the same bits. Takes densely packed slices only (row_stream_fits). With `bias` (one slice only), also adds the
// bias to each output element and writes act = silu(out), as mlp.cu's bias_silu_kernel does.
bool row_stream_fits(bool weight_transposed, const BatchedGemm& g);
int row_stream(bool weight_transposed, const BatchedGemm& g, const float* bias, float* act, cudaStream_t stream,
               const char** what);

}  // namespace tmlp
