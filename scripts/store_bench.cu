// Store microbenchmark (Hopper): does the shape of the stores decide how fast a 520 MB dW can be written?
// The dW GEMM (and cuBLAS's) writes dW (N x D bf16, row-major) at ~70 % of DRAM peak, from tile-shaped TMA
// stores; the CUDA-core dW kernel's plain row stores write the same bytes at 4.2 TB/s (git:NOTES.md, "v7 run 6").
// Each kernel below writes the whole N x D buffer with no arithmetic, from registers or a shared-memory stage
// filled once, so only the store pattern differs:
//   rows      every thread st.global 16 bytes, a block a whole row at a time (the CUDA-core kernel's pattern)
//   box_n     TMA 2D stores of BOX_M x BOX_N boxes, 128 x BOX_N tiles in the dW GEMM's order (along D first)
//   box_m     the same boxes, tiles along N first (the other raster order)
//   span      1D bulk stores (cp.async.bulk) of whole contiguous rows, SPAN_ROWS rows at a time
// Build: nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a store_bench.cu -o store_bench
// Run: ./store_bench [reps]  -> one line per kernel: median µs and TB/s over reps.
#include <cuda.h>
#include <cuda_runtime.h>
#include <cuda_bf16.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CHECK(x)                                                                                   \
  do {                                                                                             \
    cudaError_t e_ = (x);                                                                          \
    if (e_ != cudaSuccess) {                                                                       \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));      \
      std::exit(1);                                                                                \
    }                                                                                              \
  } while (0)

constexpr int kN = 96768, kD = 2688;  // the H3 dW
constexpr int kTileM = 128;
constexpr int kBoxM = 64;
constexpr int kStages = 2;  // TMA store groups in flight per CTA, as the GEMM's epilogue (StagesD = 2)
constexpr int kSpanRows = 4;  // 4 rows = 21 504 contiguous bytes per bulk store

__global__ void rows_kernel(uint4* __restrict__ out, int n, int d8) {
  const uint4 v = make_uint4(threadIdx.x, blockIdx.x, 0x3f803f80u, 0x40004000u);
  for (int64_t r = blockIdx.x; r < n; r += gridDim.x)
    for (int c = threadIdx.x; c < d8; c += blockDim.x) out[r * d8 + c] = v;
}

template <int BoxN>
__global__ void box_kernel(const __grid_constant__ CUtensorMap map, int tiles_m, int tiles_n, bool along_d) {
  extern __shared__ __align__(128) unsigned char smem[];
  constexpr int box_bytes = kBoxM * BoxN * 2;
  for (int i = threadIdx.x; i < kStages * box_bytes / 4; i += blockDim.x) reinterpret_cast<uint32_t*>(smem)[i] = i;
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");  // generic-proxy writes visible to TMA
  __syncthreads();
  if (threadIdx.x != 0) return;
  const int tiles = tiles_m * tiles_n;
  int issued = 0;
  for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
    const int m = along_d ? t / tiles_n : t % tiles_m, n = along_d ? t % tiles_n : t / tiles_m;
    for (int h = 0; h < kTileM / kBoxM; ++h, ++issued) {
      asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(kStages - 1) : "memory");
      const unsigned saddr = static_cast<unsigned>(__cvta_generic_to_shared(smem + (issued % kStages) * box_bytes));
      asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];" ::"l"(&map),
                   "r"(n * BoxN), "r"(m * kTileM + h * kBoxM), "r"(saddr)
                   : "memory");
      asm volatile("cp.async.bulk.commit_group;" ::: "memory");
    }
  }
  asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
}

__global__ void span_kernel(char* __restrict__ out, int n, int row_bytes) {
  extern __shared__ __align__(128) unsigned char smem[];
  const int span = kSpanRows * row_bytes;
  for (int i = threadIdx.x; i < kStages * span / 4; i += blockDim.x) reinterpret_cast<uint32_t*>(smem)[i] = i;
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  __syncthreads();
  if (threadIdx.x != 0) return;
  int issued = 0;
  for (int64_t r = int64_t(blockIdx.x) * kSpanRows; r < n; r += int64_t(gridDim.x) * kSpanRows, ++issued) {
    asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(kStages - 1) : "memory");
    const unsigned saddr = static_cast<unsigned>(__cvta_generic_to_shared(smem + (issued % kStages) * span));
    asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(out + r * row_bytes),
                 "r"(saddr), "r"(span)
                 : "memory");
    asm volatile("cp.async.bulk.commit_group;" ::: "memory");
  }
  asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
}

using EncodeTiled = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                                 const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                                 CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

static CUtensorMap make_map(void* base, int box_n) {
  void* p = nullptr;
  cudaDriverEntryPointQueryResult q;
  CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &q));
  if (q != cudaDriverEntryPointSuccess || !p) std::exit((std::fprintf(stderr, "no cuTensorMapEncodeTiled\n"), 1));
  CUtensorMap map;
  const cuuint64_t dims[2] = {kD, kN}, strides[1] = {uint64_t(kD) * 2};
  const cuuint32_t box[2] = {cuuint32_t(box_n), kBoxM}, elem[2] = {1, 1};
  CUresult r = reinterpret_cast<EncodeTiled>(p)(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, base, dims, strides, box,
                                                elem, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE,
                                                CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) std::exit((std::fprintf(stderr, "cuTensorMapEncodeTiled failed: %d\n", int(r)), 1));
  return map;
}

template <class Launch>
static void time_it(const char* name, int reps, Launch launch) {
  cudaEvent_t a, b;
  CHECK(cudaEventCreate(&a));
  CHECK(cudaEventCreate(&b));
  launch();  // warm-up
  CHECK(cudaDeviceSynchronize());
  std::vector<float> ms;
  for (int i = 0; i < reps; ++i) {
    CHECK(cudaEventRecord(a));
    launch();
    CHECK(cudaEventRecord(b));
    CHECK(cudaEventSynchronize(b));
    float t = 0;
    CHECK(cudaEventElapsedTime(&t, a, b));
    ms.push_back(t);
  }
  CHECK(cudaGetLastError());
  std::sort(ms.begin(), ms.end());
  const double us = ms[ms.size() / 2] * 1e3, bytes = double(kN) * kD * 2;
  std::printf("%-22s %8.1f us  %5.2f TB/s  (min %.1f us)\n", name, us, bytes / us / 1e6, ms.front() * 1e3);
}

template <int BoxN>
static void boxes(void* buf, int sms, int reps) {
  const CUtensorMap map = make_map(buf, BoxN);
  const int smem = kStages * kBoxM * BoxN * 2;
  CHECK(cudaFuncSetAttribute(box_kernel<BoxN>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  const int tm = kN / kTileM, tn = (kD + BoxN - 1) / BoxN;  // a last partial box column is clipped by TMA
  char name[64];
  std::snprintf(name, sizeof name, "box_n %dx%d", kBoxM, BoxN);
  time_it(name, reps, [&] { box_kernel<BoxN><<<sms, 32, smem>>>(map, tm, tn, true); });
  std::snprintf(name, sizeof name, "box_m %dx%d", kBoxM, BoxN);
  time_it(name, reps, [&] { box_kernel<BoxN><<<sms, 32, smem>>>(map, tm, tn, false); });
  std::snprintf(name, sizeof name, "box_n %dx%d x2/SM", kBoxM, BoxN);
  time_it(name, reps, [&] { box_kernel<BoxN><<<2 * sms, 32, smem>>>(map, tm, tn, true); });
}

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::atoi(argv[1]) : 30;
  int sms = 0;
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  void* buf = nullptr;
  CHECK(cudaMalloc(&buf, size_t(kN) * kD * 2));
  const int d8 = kD / 8, threads = (d8 + 31) / 32 * 32;
  time_it("rows st.global x4/SM", reps, [&] { rows_kernel<<<4 * sms, threads>>>(static_cast<uint4*>(buf), kN, d8); });
  time_it("rows st.global x8/SM", reps, [&] { rows_kernel<<<8 * sms, threads>>>(static_cast<uint4*>(buf), kN, d8); });
  time_it("cudaMemsetAsync", reps, [&] { CHECK(cudaMemsetAsync(buf, 0, size_t(kN) * kD * 2)); });
  boxes<64>(buf, sms, reps);
  boxes<192>(buf, sms, reps);
  boxes<256>(buf, sms, reps);
  const int span_smem = kStages * kSpanRows * kD * 2;
  CHECK(cudaFuncSetAttribute(span_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, span_smem));
  time_it("span 4 rows", reps, [&] { span_kernel<<<sms, 32, span_smem>>>(static_cast<char*>(buf), kN, kD * 2); });
  time_it("span 4 rows x2/SM", reps,
          [&] { span_kernel<<<2 * sms, 32, span_smem>>>(static_cast<char*>(buf), kN, kD * 2); });
  CHECK(cudaDeviceSynchronize());
  return 0;
}
