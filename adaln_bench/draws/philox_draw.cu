// Seeded float32 normal/uniform draws laid out as PyTorch's CUDA generator lays them out on a GPU with a given
// launch geometry (plan.py says how, and the Python side works out the grid and offsets). Plain C interface:
// no torch, no C++ ABI across the boundary; the caller passes a torch-allocated buffer, the device index and
// a cudaStream_t, and gets 0 or a nonzero code with a message.
//
// One launch fills out[0, numel): `blocks` blocks of 256 threads, thread g draws from Philox4x32-10
// subsequence g starting at word `offset` (curand_init(seed, g, offset)), one curand_normal4/curand_uniform4
// call per round, and word w of round r goes to element r*4G + w*G + g (G = blocks * 256).
#include <cuda_runtime.h>
#include <curand_kernel.h>

#include <cstdarg>
#include <cstdint>
#include <cstdio>

#define ADALN_DRAWS_ABI 1
#define ADALN_DRAWS_THREADS 256

enum { kNormal = 0, kUniform = 1 };

namespace {

// a, b: mean and std (normal) or low and high (uniform). The value is computed as PyTorch's float32 transforms
// do: rand * std + mean for normal; for uniform rand * (high - low) + low, with `high` mapped to `low` (curand's
// uniform is in (0, 1]; PyTorch flips it to [0, 1)).
template <int KIND>
__global__ void __launch_bounds__(ADALN_DRAWS_THREADS)
draw_kernel(float* __restrict__ out, int64_t numel, unsigned long long seed, unsigned long long offset, float a,
            float b) {
  const int64_t g = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t threads = int64_t(gridDim.x) * blockDim.x;
  curandStatePhilox4_32_10_t state;
  curand_init(seed, (unsigned long long)g, offset, &state);
  const int64_t round_span = 4 * threads;
  const int64_t rounds = (numel + round_span - 1) / round_span;
  const float range = b - a;
  for (int64_t r = 0; r < rounds; ++r) {
    const float4 v = (KIND == kNormal) ? curand_normal4(&state) : curand_uniform4(&state);
    const float words[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int w = 0; w < 4; ++w) {
      const int64_t i = r * round_span + w * threads + g;
      if (i < numel) {
        float x;
        if (KIND == kNormal) {
          x = words[w] * b + a;
        } else {
          x = words[w] * range + a;
          x = (x == b) ? a : x;
        }
        out[i] = x;
      }
    }
  }
}

void set_err(char* err, int err_len, const char* fmt, ...) {
  if (!err || err_len <= 0) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, size_t(err_len), fmt, ap);
  va_end(ap);
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) int adaln_draws_abi_version() { return ADALN_DRAWS_ABI; }

__attribute__((visibility("default"))) int adaln_draws_threads_per_block() { return ADALN_DRAWS_THREADS; }

// kind: 0 normal, 1 uniform. Returns 0 on success; 1 bad argument (nothing launched); 2 CUDA error.
__attribute__((visibility("default"))) int adaln_draws_fill(int kind, void* out, int64_t numel,
                                                            unsigned long long seed, unsigned long long offset,
                                                            int64_t blocks, float a, float b, int device,
                                                            void* stream, char* err, int err_len) {
  if (kind != kNormal && kind != kUniform) {
    set_err(err, err_len, "kind must be 0 (normal) or 1 (uniform), got %d", kind);
    return 1;
  }
  if (numel < 1 || numel > INT32_MAX || blocks < 1 || blocks > INT32_MAX || out == nullptr) {
    set_err(err, err_len, "bad launch: numel %lld (1 .. 2^31-1), blocks %lld, out %p", (long long)numel,
            (long long)blocks, out);
    return 1;
  }
  if (offset % 4) {
    set_err(err, err_len, "the Philox offset must be a multiple of 4, got %llu", offset);
    return 1;
  }
  cudaError_t ce = cudaSetDevice(device);  // makes the device's primary context (torch's) current
  if (ce != cudaSuccess) {
    set_err(err, err_len, "cudaSetDevice(%d): %s", device, cudaGetErrorString(ce));
    return 2;
  }
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  float* o = static_cast<float*>(out);
  const dim3 grid(static_cast<unsigned>(blocks)), block(ADALN_DRAWS_THREADS);
  if (kind == kNormal) {
    draw_kernel<kNormal><<<grid, block, 0, s>>>(o, numel, seed, offset, a, b);
  } else {
    draw_kernel<kUniform><<<grid, block, 0, s>>>(o, numel, seed, offset, a, b);
  }
  ce = cudaGetLastError();
  if (ce != cudaSuccess) {
    set_err(err, err_len, "launching the draw kernel (%lld blocks): %s", (long long)blocks, cudaGetErrorString(ce));
    return 2;
  }
  return 0;
}

}  // extern "C"
