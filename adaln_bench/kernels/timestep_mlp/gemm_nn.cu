// Row GEMMs with the weight read transposed (M contiguous): the backward's d_act = dY W2 and dx = dh W1.
#include "gemm_impl.cuh"

namespace tmlp {
int gemm_nn(int config, const BatchedGemm& g, cudaStream_t stream, const char** what) {
  return detail::row_gemm<cutlass::layout::ColumnMajor>(config, g, stream, what);
}
}  // namespace tmlp
