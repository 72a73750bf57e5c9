// Row GEMMs with the weight row-major (K contiguous): the forward's two linears (h = x W1^T, y = a W2^T).
#include "gemm_impl.cuh"

namespace tmlp {
int gemm_tn(int config, const BatchedGemm& g, cudaStream_t stream, const char** what) {
  return detail::row_gemm<cutlass::layout::RowMajor>(config, g, stream, what);
}
}  // namespace tmlp
