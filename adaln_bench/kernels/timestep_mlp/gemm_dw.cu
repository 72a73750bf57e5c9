// Weight-gradient GEMMs (dW2 = dY^T a, dW1 = dh^T x): a sum over T in k order, no split, so repeatable.
#include "gemm_impl.cuh"

namespace tmlp {
int gemm_dw(const BatchedGemm& g, cudaStream_t stream, const char** what) {
  using Row = cutlass::layout::RowMajor;
  using Col = cutlass::layout::ColumnMajor;
  return detail::large<Col, Row, Row>(g, stream, what);
}
}  // namespace tmlp
