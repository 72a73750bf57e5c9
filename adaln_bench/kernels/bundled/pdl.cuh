// Programmatic dependent launch (ADALN_PDL, sm90 path only; off by default): each kernel of a call is launched so
// that its blocks may be scheduled while the kernel before it drains, and waits (griddepcontrol.wait: the previous
// kernel complete and its memory visible) before its first load or store. Numerics do not change. Every kernel
// waits before it touches memory, so each completes only after the one before it: a normally launched kernel
// after the call (torch's) sees all of them done.
#pragma once
#include <cuda_runtime.h>

#ifndef ADALN_PDL
#define ADALN_PDL 0
#endif

namespace adaln {

__device__ __forceinline__ void wait_for_previous_kernel() {
#if ADALN_PDL && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// kernel<<<grid, block, smem, stream>>>(args...), with the programmatic-serialization attribute under ADALN_PDL.
template <class... Params, class... Args>
cudaError_t launch_kernel(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                          Args... args) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = ADALN_PDL ? 1 : 0;
  return cudaLaunchKernelEx(&cfg, kernel, static_cast<Params>(args)...);
}

}  // namespace adaln
