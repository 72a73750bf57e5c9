// The ceiling of mma.sync (m16n8k16, bf16 in, fp32 accumulate) on this GPU: what the portable path (CUTLASS 2,
// sm80-style) could reach at best on Hopper, where wgmma is the fast instruction. Each warp runs ACC
// independent accumulator chains of `iters` mma.sync each on register operands (no memory traffic); the
// grid fills every SM with `warps` warps. Median of 20 event-timed launches per configuration, TFLOP/s.
// Build and run: nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a scripts/mma_peak.cu -o mma_peak && ./mma_peak
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <vector>

#define CHECK(x)                                                                  \
  do {                                                                            \
    cudaError_t e_ = (x);                                                         \
    if (e_ != cudaSuccess) {                                                      \
      std::printf("CUDA error %s at %s:%d\n", cudaGetErrorString(e_), __FILE__, __LINE__); \
      return 1;                                                                   \
    }                                                                             \
  } while (0)

template <int ACC>
__global__ void mma_chains(const uint32_t* in, float* out, int iters) {
  const int lane = threadIdx.x & 31;
  uint32_t a[4], b[2];
  for (int i = 0; i < 4; ++i) a[i] = in[(lane + i) & 31];
  for (int i = 0; i < 2; ++i) b[i] = in[(lane + 7 * i) & 31];
  float c[ACC][4];
  for (int k = 0; k < ACC; ++k)
    for (int e = 0; e < 4; ++e) c[k][e] = 0.0f;
  for (int it = 0; it < iters; ++it) {
#pragma unroll
    for (int k = 0; k < ACC; ++k)
      asm volatile(
          "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
          "{%0, %1, %2, %3};\n"
          : "+f"(c[k][0]), "+f"(c[k][1]), "+f"(c[k][2]), "+f"(c[k][3])
          : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
  float s = 0.0f;
  for (int k = 0; k < ACC; ++k)
    for (int e = 0; e < 4; ++e) s += c[k][e];
  out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}

template <int ACC>
int measure(int sms, int warps_per_block, int blocks_per_sm, int iters) {
  const int blocks = sms * blocks_per_sm, threads = warps_per_block * 32;
  uint32_t* in = nullptr;
  float* out = nullptr;
  CHECK(cudaMalloc(&in, 32 * sizeof(uint32_t)));
  CHECK(cudaMalloc(&out, size_t(blocks) * threads * sizeof(float)));
  std::vector<uint32_t> h(32);
  for (int i = 0; i < 32; ++i) h[i] = 0x3f803f80u ^ (uint32_t(i) << 3);  // bf16 pairs near 1.0
  CHECK(cudaMemcpy(in, h.data(), 32 * sizeof(uint32_t), cudaMemcpyHostToDevice));
  cudaEvent_t e0, e1;
  CHECK(cudaEventCreate(&e0));
  CHECK(cudaEventCreate(&e1));
  mma_chains<ACC><<<blocks, threads>>>(in, out, iters);  // warm-up
  CHECK(cudaDeviceSynchronize());
  std::vector<float> ms;
  for (int r = 0; r < 20; ++r) {
    CHECK(cudaEventRecord(e0));
    mma_chains<ACC><<<blocks, threads>>>(in, out, iters);
    CHECK(cudaEventRecord(e1));
    CHECK(cudaEventSynchronize(e1));
    float t = 0;
    CHECK(cudaEventElapsedTime(&t, e0, e1));
    ms.push_back(t);
  }
  std::sort(ms.begin(), ms.end());
  const double flop = 2.0 * 16 * 8 * 16 * double(iters) * ACC * blocks * warps_per_block;
  std::printf("| %d | %d | %d | %.3f | %.1f | %.1f |\n", ACC, warps_per_block * blocks_per_sm, blocks, ms[10],
              flop / (ms[10] * 1e-3) / 1e12, flop / (ms[0] * 1e-3) / 1e12);
  CHECK(cudaFree(in));
  CHECK(cudaFree(out));
  return 0;
}

int main() {
  cudaDeviceProp p;
  if (cudaGetDeviceProperties(&p, 0) != cudaSuccess) {
    std::printf("no CUDA device\n");
    return 1;
  }
  std::printf("%s, %d SMs, mma.sync.m16n8k16 bf16 -> fp32, register operands only\n", p.name, p.multiProcessorCount);
  std::printf("| chains per warp | warps per SM | blocks | median ms | TFLOP/s (median) | TFLOP/s (best) |\n");
  std::printf("| --- | --- | --- | --- | --- | --- |\n");
  const int sms = p.multiProcessorCount, iters = 20000;
  int rc = 0;
  rc |= measure<4>(sms, 4, 1, iters);
  rc |= measure<4>(sms, 8, 1, iters);
  rc |= measure<8>(sms, 4, 1, iters);
  rc |= measure<8>(sms, 8, 1, iters);
  rc |= measure<8>(sms, 8, 2, iters);
  rc |= measure<16>(sms, 8, 1, iters);
  rc |= measure<16>(sms, 16, 1, iters);
  return rc;
}
