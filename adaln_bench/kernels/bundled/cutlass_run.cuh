// One launch wrapper for every CUTLASS GEMM of both code paths (CUTLASS 2 GemmUniversal and CUTLASS 3
// GemmUniversalAdapter share can_implement / get_workspace_size / initialize / run). Nothing is launched
// after a failed setup step, a descriptor-encoding failure included.
#pragma once
#include "cutlass/cutlass.h"
#include "gemms.h"
#include "status.h"

namespace adaln {

// Descriptor failures recorded on this thread since the last reset (see tma_guard.cuh; always 0 on the
// portable path, which encodes no descriptors).
void reset_descriptor_failures();
int descriptor_failures(int* first_result);

// Pdl (CUTLASS 3 only): launched with programmatic stream serialization (pdl.cuh).
template <class Gemm, bool Pdl = false>
int run_cutlass(typename Gemm::Arguments const& args, void* ws, size_t ws_bytes, cudaStream_t stream, Err err,
                const char* what) {
  Gemm gemm;
  cutlass::Status st = Gemm::can_implement(args);
  if (st != cutlass::Status::kSuccess) {
    set_err(err, "%s: CUTLASS can_implement failed: %s", what, cutlassGetStatusString(st));
    return ADALN_GEMM_UNSUPPORTED;
  }
  size_t need = Gemm::get_workspace_size(args);
  if (need > ws_bytes) {
    set_err(err, "%s: CUTLASS workspace %zu bytes > %zu provided", what, need, ws_bytes);
    return ADALN_GEMM_WORKSPACE;
  }
  reset_descriptor_failures();
  st = gemm.initialize(args, ws, stream);
  int first = 0;
  if (int n = descriptor_failures(&first)) {
    set_err(err, "%s: %d TMA descriptor(s) could not be encoded (CUresult %d); nothing was launched", what, n, first);
    return ADALN_DESCRIPTOR;
  }
  if (st != cutlass::Status::kSuccess) {
    set_err(err, "%s: CUTLASS initialize failed: %s (%s)", what, cutlassGetStatusString(st),
            cudaGetErrorString(cudaGetLastError()));
    return ADALN_GEMM_INITIALIZE;
  }
  if constexpr (Pdl)
    st = gemm.run(stream, nullptr, true);
  else
    st = gemm.run(stream);
  cudaError_t ce = cudaGetLastError();
  if (st != cutlass::Status::kSuccess || ce != cudaSuccess) {
    set_err(err, "%s: CUTLASS run failed: %s / %s", what, cutlassGetStatusString(st), cudaGetErrorString(ce));
    return ADALN_GEMM_RUN;
  }
  return ADALN_OK;
}

}  // namespace adaln
