// Makes TMA descriptor encoding failures visible. CuTe encodes each TMA descriptor through the driver
// (cuTensorMapEncodeTiled) inside CUTLASS's initialize(); on failure it prints to stderr and then only
// asserts, which NDEBUG compiles out, so initialize() reports success and the kernel later runs with a bad
// descriptor (seen: "illegal instruction" in autograd's backward thread, where no context was current).
// This header must come before any CuTe header: it routes CUTLASS's driver-call macro through checked
// wrappers that refuse to encode without a current context and record every failure for the calling thread.
#pragma once
#include <cuda.h>

#include "cutlass/cuda_host_adapter.hpp"

namespace adaln {

bool context_is_current();                        // api.cu: the driver's current context is not null
void note_descriptor_failure(CUresult result);    // api.cu: recorded per thread, read after initialize()

template <class... Args>
CUresult checked_cuTensorMapEncodeTiled(Args... args) {
  CUresult r = context_is_current() ? cutlass::call_cuTensorMapEncodeTiled(args...) : CUDA_ERROR_INVALID_CONTEXT;
  if (r != CUDA_SUCCESS) note_descriptor_failure(r);
  return r;
}

template <class... Args>
CUresult checked_cuTensorMapEncodeIm2col(Args... args) {
  CUresult r = context_is_current() ? cutlass::call_cuTensorMapEncodeIm2col(args...) : CUDA_ERROR_INVALID_CONTEXT;
  if (r != CUDA_SUCCESS) note_descriptor_failure(r);
  return r;
}

}  // namespace adaln

#undef CUTLASS_CUDA_DRIVER_WRAPPER_CALL
#define CUTLASS_CUDA_DRIVER_WRAPPER_CALL(func) ::adaln::checked_##func
