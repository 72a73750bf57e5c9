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

// d_act, batched over L consecutive K ranges of length klen (range l = [l*klen, l*klen + klen) of the N
// reduction, W and dY pointing at range 0's first element, row 0 of this T block; dY's row stride is N):
// out[l][t][d] = ((0 + P_0) + P_1) + ... over the chunks of kchunk elements in range l (the last may be
// shorter), P_j = sum over chunk j of dY[t, k] * W[k, d], a fresh fp32 accumulation in k order. Planes of out
// are `plane` floats apart, rows D apart. kSumsInGemm (per path): whether a range may hold more than one chunk
// (the sm90 mainloop sums them); where it is false, klen <= kchunk (one chunk, out[l] = P_0).
int gemm_dact(const void* W, const void* dY, float* out, int64_t Tb, int64_t D, int64_t N, int64_t L, int64_t klen,
              int64_t kchunk, int64_t plane, int sm_count, void* ws, size_t ws_bytes, cudaStream_t stream, Err err);
extern const bool kSumsInGemm;

// dW[N_out, D] = dY^T . act  (K = T, one pass over T in fixed order, no split)
int gemm_dw(const void* dY, const void* act, void* dW, int64_t T, int64_t D, int64_t N, int sm_count, void* ws,
            size_t ws_bytes, cudaStream_t stream, Err err);

// dW as above for T <= 256 on tensor cores outside a GEMM, a row-ordered store stream (dw_mma.cu, both paths):
// per tier of T, D a multiple of the tier's columns a warp (64, 32, 32) whose quotient has a divisor between 3 and
// the tier's warps a block (dw_mma_fits is the check).
bool dw_mma_fits(int64_t T, int64_t D, int64_t N);
int dw_mma(const void* dY, const void* act, void* dW, int64_t T, int64_t D, int64_t N, int sm_count,
           cudaStream_t stream, Err err);

}  // namespace adaln
