// Internal interface between the C API (api.cu) and the GEMM translation units of one code path.
// Every function enqueues work on `stream` and returns 0 on success, else writes a message to err.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cuda_runtime.h>

namespace adaln {

struct Err {
  char* buf;
  int len;
};
void set_err(Err e, const char* fmt, ...);

// Y^T[N_out, T] = W[N_out, D] . act^T + b  (bf16 out, column-major (N_out x T) == row-major Y (T, N_out))
int gemm_fwd(const void* W, const void* act, const void* bias, void* Y, int64_t T, int64_t D, int64_t N,
             int sm_count, void* ws, size_t ws_bytes, cudaStream_t stream, Err err);

// partial[l][t][d] = sum_{k < kchunk} dY[t, l*kchunk + k] * W[l*kchunk + k, d]  for l < L (fp32, fresh accumulator
// per chunk). W and dY point at the first chunk's first element (row 0 of this T block); dY's row stride is N;
// partial planes are `plane` floats apart, rows D apart.
int gemm_dact(const void* W, const void* dY, float* partial, int64_t Tb, int64_t D, int64_t N, int64_t L,
              int64_t kchunk, int64_t plane, int sm_count, void* ws, size_t ws_bytes, cudaStream_t stream, Err err);

// dW[N_out, D] = dY^T . act  (K = T, one pass over T in fixed order, no split)
int gemm_dw(const void* dY, const void* act, void* dW, int64_t T, int64_t D, int64_t N, int sm_count, void* ws,
            size_t ws_bytes, cudaStream_t stream, Err err);

}  // namespace adaln
