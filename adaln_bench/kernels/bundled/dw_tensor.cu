// dW for small T on tensor cores (both paths): dW[n, d] = sum_t dY[t, n] * act[t, d], T <= kDwTcMaxT.
// At small T the dW GEMM is a 520 MB store stream with little arithmetic, and a GEMM epilogue (one
// warpgroup's subtiles at a time) does not keep enough stores in flight. Here every warp stores: a block owns
// kRows rows of dW and walks all of D in steps of kCols columns; per step each warp computes its 16 rows x
// kCols on mma.sync (WMMA, bf16 in, fp32 accumulate, k in order 16 at a time, T padded with zeros to a
// multiple of 16), stages them in its own part of shared memory and writes them out as bf16 rows (16-byte
// stores, one rounding). The next step's act columns are loaded into registers before the step's math.
// The order depends on T only: dW is repeatable (it is never compared across batches).
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <mma.h>

#include <cstdint>

#include "gemms.h"
#include "status.h"

namespace adaln {
namespace {
using namespace nvcuda;

constexpr int kRows = 128;            // rows of dW per block (8 warps x 16)
constexpr int kCols = 128;            // columns of dW per step
constexpr int kWarps = kRows / 16;
constexpr int kThreads = 32 * kWarps;
constexpr int kLdA = kRows + 8;       // bf16 elements per k-row of the dY tile (padding: no bank conflicts)
constexpr int kLdB = kCols + 8;       // bf16 elements per k-row of the act tile
constexpr int kLdC = kCols + 4;       // floats per row of the staged result
constexpr int kBLoads = kDwTcMaxT * kCols / 8 / kThreads;  // 16-byte act loads per thread per step

struct Smem {
  __nv_bfloat16 a[kDwTcMaxT][kLdA];  // dY tile: a[t][r] = dY[t, n0 + r] (matrix_a, col-major)
  __nv_bfloat16 b[kDwTcMaxT][kLdB];  // act columns of one step: b[t][c] = act[t, d0 + c] (matrix_b, row-major)
  float c[kRows][kLdC];              // one step's result, fp32, each warp its own 16 rows
};

__device__ __forceinline__ uint4 load_act(const __nv_bfloat16* act, int T, int64_t D, int Kp, int64_t d0, int i) {
  // i-th 16-byte piece of the step's (Kp x kCols) act tile; zero past T or D (D is a multiple of 8)
  const int t = i / (kCols / 8), c = (i % (kCols / 8)) * 8;
  if (t >= Kp || t >= T || d0 + c >= D) return make_uint4(0, 0, 0, 0);
  return *reinterpret_cast<const uint4*>(act + int64_t(t) * D + d0 + c);
}

__global__ void __launch_bounds__(kThreads, 2) dw_tensor(const __nv_bfloat16* __restrict__ dY,
                                                      const __nv_bfloat16* __restrict__ act,
                                                      __nv_bfloat16* __restrict__ dW, int T, int64_t N, int64_t D) {
  extern __shared__ __align__(128) unsigned char raw[];
  Smem& s = *reinterpret_cast<Smem*>(raw);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int Kp = (T + 15) / 16 * 16;
  const int64_t n0 = int64_t(blockIdx.x) * kRows;

  // dY tile, zero-padded past T and N (16-byte pieces: N and n0 are multiples of 8)
  for (int i = threadIdx.x; i < Kp * (kRows / 8); i += kThreads) {
    const int t = i / (kRows / 8), r = (i % (kRows / 8)) * 8;
    uint4 v = make_uint4(0, 0, 0, 0);
    if (t < T && n0 + r < N) v = *reinterpret_cast<const uint4*>(dY + int64_t(t) * N + n0 + r);
    *reinterpret_cast<uint4*>(&s.a[t][r]) = v;
  }
  uint4 next[kBLoads];
#pragma unroll
  for (int j = 0; j < kBLoads; ++j) next[j] = load_act(act, T, D, Kp, 0, threadIdx.x + j * kThreads);

  for (int64_t d0 = 0; d0 < D; d0 += kCols) {
    __syncthreads();  // the previous step's b has been read
#pragma unroll
    for (int j = 0; j < kBLoads; ++j) {
      const int i = threadIdx.x + j * kThreads, t = i / (kCols / 8), c = (i % (kCols / 8)) * 8;
      if (t < Kp) *reinterpret_cast<uint4*>(&s.b[t][c]) = next[j];
    }
    __syncthreads();
    if (d0 + kCols < D) {  // the next step's act columns, in flight during this step's math and stores
#pragma unroll
      for (int j = 0; j < kBLoads; ++j) next[j] = load_act(act, T, D, Kp, d0 + kCols, threadIdx.x + j * kThreads);
    }
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[kCols / 16];
#pragma unroll
    for (int f = 0; f < kCols / 16; ++f) wmma::fill_fragment(acc[f], 0.0f);
    for (int k = 0; k < Kp; k += 16) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::col_major> fa;
      wmma::load_matrix_sync(fa, &s.a[k][warp * 16], kLdA);
#pragma unroll
      for (int f = 0; f < kCols / 16; ++f) {
        wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::row_major> fb;
        wmma::load_matrix_sync(fb, &s.b[k][f * 16], kLdB);
        wmma::mma_sync(acc[f], fa, fb, acc[f]);
      }
    }
#pragma unroll
    for (int f = 0; f < kCols / 16; ++f)
      wmma::store_matrix_sync(&s.c[warp * 16][f * 16], acc[f], kLdC, wmma::mem_row_major);
    __syncwarp();
    // this warp's 16 rows: two rows per pass, 16 lanes a row, 8 columns (one 16-byte store) a lane
    for (int r = lane / 16; r < 16; r += 2) {
      const int64_t n = n0 + warp * 16 + r;
      const int c = (lane % 16) * 8;
      if (n >= N || d0 + c >= D) continue;
      const float* src = &s.c[warp * 16 + r][c];
      uint4 o;
      __nv_bfloat162* h = reinterpret_cast<__nv_bfloat162*>(&o);
#pragma unroll
      for (int q = 0; q < 4; ++q) h[q] = __floats2bfloat162_rn(src[2 * q], src[2 * q + 1]);
      *reinterpret_cast<uint4*>(dW + n * D + d0 + c) = o;
    }
    __syncwarp();  // the staged rows are read before the next step overwrites them
  }
}
}  // namespace

int dw_tensor_small_t(const void* dY, const void* act, void* dW, int64_t T, int64_t D, int64_t N, cudaStream_t stream,
                      Err err) {
  if (T < 1 || T > kDwTcMaxT) {
    set_err(err, "dW (tensor cores, small T): T = %lld is outside 1..%d", (long long)T, kDwTcMaxT);
    return ADALN_BAD_ARGUMENT;
  }
  static_assert(kDwTcMaxT % 16 == 0 && (kDwTcMaxT * kCols / 8) % kThreads == 0, "tile constants");
  const size_t smem = sizeof(Smem);
  cudaError_t ce = cudaFuncSetAttribute(dw_tensor, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem));
  if (ce == cudaSuccess) {
    dw_tensor<<<unsigned((N + kRows - 1) / kRows), kThreads, smem, stream>>>(
        reinterpret_cast<const __nv_bfloat16*>(dY), reinterpret_cast<const __nv_bfloat16*>(act),
        reinterpret_cast<__nv_bfloat16*>(dW), int(T), N, D);
    ce = cudaGetLastError();
  }
  if (ce != cudaSuccess) {
    set_err(err, "dW kernel (tensor cores, small T): %s", cudaGetErrorString(ce));
    return ADALN_LAUNCH;
  }
  return ADALN_OK;
}
}  // namespace adaln
