// Programmatic dependent launch (ADALN_PDL: on for the sm90 path since v13, git:NOTES.md "v13 run 30": forward +
// backward 1-3.6 µs faster at T <= 64; off on the portable path, whose CUTLASS 2 kernels have no grid
// dependency control). Every translation unit takes the knob from here, so all of a library's kernels agree.
// Each kernel of a call is launched so that its blocks may be scheduled while the kernel before it drains, and
// waits (griddepcontrol.wait: the previous kernel complete and its memory visible) before its first load or
// store. Numerics do not change. As every kernel waits before it touches memory, each completes only after the
// one before it: a normally launched kernel after the call (torch's) sees all of them done.
#pragma once
#include <cuda_runtime.h>

#ifndef ADALN_PDL
#if defined(ADALN_PATH_SM90)
#define ADALN_PDL 1
#else
#define ADALN_PDL 0
#endif
#endif

// ADALN_PDL_TRIGGER (v15): some of the project's own kernels (api.cu says which and when) let the next kernel's
// blocks be scheduled as soon as they have waited (griddepcontrol.launch_dependents), as CUTLASS's kernels do at
// their last tile; otherwise the next kernel is launched only once every block has exited. The next kernel still
// waits for this one's completion before it touches memory, so the order above holds.
#ifndef ADALN_PDL_TRIGGER
#define ADALN_PDL_TRIGGER 1
#endif

namespace adaln {

__device__ __forceinline__ void wait_for_previous_kernel() {
#if ADALN_PDL && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// Lets the next kernel of the stream be scheduled now (its blocks still wait for this kernel to complete).
__device__ __forceinline__ void release_next_kernel() {
#if ADALN_PDL && ADALN_PDL_TRIGGER && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// kernel<<<grid, block, smem, stream>>>(args...), with the programmatic-serialization attribute under ADALN_PDL.
// Returns the launch's error, else whatever cudaGetLastError held (it is cleared either way).
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
  const cudaError_t launched = cudaLaunchKernelEx(&cfg, kernel, static_cast<Params>(args)...);
  const cudaError_t last = cudaGetLastError();
  return launched != cudaSuccess ? launched : last;
}

}  // namespace adaln
