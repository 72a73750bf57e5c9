// Bundled kernels of the four gathered AdaLN operators (issue 32): row_gather, norm_modulate, gate_residual,
// final_adaln_out (whose norm part is norm_modulate with a 3-entry table). Plain C interface (extern "C", raw
// pointers, sizes, device index, cudaStream_t in; a status and a message out), loaded from Python with ctypes.
//
// Two kinds of kernels:
//  * row kernels (outputs and row gradients): one CTA per token row, each thread a fixed set of 8-column vectors;
//    row reductions (sum of squares, the dx dot product) are a fixed shuffle tree per warp and the warp sums
//    added in warp order, so a row's bits depend on H only, never on the batch.
//  * column kernels (table / parameter gradients): no atomics. The S tokens are cut into G = 8·C "lanes" of
//    L = ceil(S / G) consecutive tokens, C = min(CMAX, ceil(S / 512)) chunks (a function of S only; CMAX a
//    constant of the operator). A CTA = one chunk x one column slice; its warp w walks lane 8c + w in ascending
//    token order, keeping fp32 partial sums for every table entry in registers; the 8 lane sums are folded in
//    lane order in shared memory and written as the chunk's fp32 partial (workspace, C x entries x columns);
//    a fold kernel adds the C chunk partials in chunk order and rounds to bf16 once.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdarg>
#include <cstdint>
#include <cstdio>

#define GAT_API extern "C" __attribute__((visibility("default")))
#define GAT_ABI_VERSION 4  // 4: the process-wide variant switches are gone

enum GatStatus {
  GAT_OK = 0,
  GAT_BAD_ARGUMENT = 1,  // a size, pointer, alignment or workspace the kernel does not take (nothing launched)
  GAT_DEVICE = 10,       // cudaSetDevice / attribute query failed
  GAT_WRONG_ARCH = 11,   // the library was built for another compute capability
  GAT_LAUNCH = 12,       // a kernel failed to launch
  GAT_PENDING = 15,      // a CUDA error was pending before the call (nothing launched)
};

#ifndef GAT_REQUIRED_CC
#error "define GAT_REQUIRED_CC (e.g. 90 for sm_90a, 100 for sm_100a)"
#endif

namespace {

using bf16 = __nv_bfloat16;
typedef char* Err;

constexpr int kLanes = 8;           // warps of a column CTA; one lane of tokens each
constexpr int kRowsPerChunk = 512;  // C = min(CMAX, ceil(S / 512))
constexpr float kNaN = __builtin_nanf("");

// CMAX per column kernel (see docs/kernels.md: all CTAs of one launch resident at once at H = 5376 on an H200).
constexpr int kCmaxNorm9 = 6;   // norm_modulate: 42 slices x 6 = 252 CTAs, ws 6 x 9 x 2 x H x 4 B
constexpr int kCmaxNorm3 = 8;   // final_adaln_out: 42 x 8 = 336 CTAs, ws 8 x 3 x 2 x H x 4 B
constexpr int kCmaxGate = 6;    // gate_residual: 42 x 6 = 252 CTAs, ws 6 x 9 x H x 4 B
constexpr int kCmaxGather = 2;  // row_gather: 126 x 2 = 252 CTAs, ws 2 x 9 x 6H x 4 B

void set_err(Err err, int len, const char* fmt, ...) {
  if (!err || len <= 0) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, (size_t)len, fmt, ap);
  va_end(ap);
}

int64_t chunks_for(int64_t S, int cmax) {
  int64_t c = (S + kRowsPerChunk - 1) / kRowsPerChunk;
  if (c < 1) c = 1;
  return c < cmax ? c : cmax;
}
int64_t lane_rows(int64_t S, int64_t chunks) { return (S + kLanes * chunks - 1) / (kLanes * chunks); }

// --- vectors of bf16 ------------------------------------------------------------------------------------------
template <int N> struct Raw;
template <> struct Raw<4> { using T = uint2; };
template <> struct Raw<8> { using T = uint4; };

template <int N>
__device__ __forceinline__ typename Raw<N>::T ld(const bf16* p) {
  return *reinterpret_cast<const typename Raw<N>::T*>(p);
}
template <int N>
__device__ __forceinline__ typename Raw<N>::T ldg(const bf16* p) {
  return __ldg(reinterpret_cast<const typename Raw<N>::T*>(p));
}
template <int N>
__device__ __forceinline__ void st(bf16* p, const typename Raw<N>::T& v) {
  *reinterpret_cast<typename Raw<N>::T*>(p) = v;
}
template <int N>
__device__ __forceinline__ void unpack(const typename Raw<N>::T& r, float (&f)[N]) {
  const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&r);
#pragma unroll
  for (int i = 0; i < N / 2; ++i) {
    float2 v = __bfloat1622float2(h[i]);
    f[2 * i] = v.x;
    f[2 * i + 1] = v.y;
  }
}
template <int N>
__device__ __forceinline__ typename Raw<N>::T pack(const float (&f)[N]) {
  typename Raw<N>::T r;
  __nv_bfloat162* h = reinterpret_cast<__nv_bfloat162*>(&r);
#pragma unroll
  for (int i = 0; i < N / 2; ++i) h[i] = __floats2bfloat162_rn(f[2 * i], f[2 * i + 1]);
  return r;
}

// Sum over the CTA in a fixed order: xor-shuffle tree in each warp, then the warp sums in warp order.
// Every thread gets the same value. `red` holds 32 floats.
__device__ __forceinline__ float block_sum(float v, float* red) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  const int w = threadIdx.x >> 5;
  if ((threadIdx.x & 31) == 0) red[w] = v;
  __syncthreads();
  const int nw = blockDim.x >> 5;
  float t = red[0];
  for (int i = 1; i < nw; ++i) t += red[i];
  __syncthreads();
  return t;
}

// Row kernels: thread t of a CTA of blockDim threads owns the 8-column vectors t + j·blockDim, j < V.
// V and blockDim depend on H only (row_shape()).
struct RowShape {
  int v;
  int threads;
};
RowShape row_shape(int64_t H) {
  const int64_t nvec = H / 8;
  static const int vs[] = {1, 2, 3, 4, 6, 8};
  for (int v : vs) {
    int64_t t = (nvec + v - 1) / v;
    if (t <= 256) return {v, (int)((t + 31) / 32 * 32)};
  }
  int64_t t = (nvec + 7) / 8;
  return {8, (int)((t + 31) / 32 * 32)};  // up to 1024 threads (H <= 65536, checked by the caller)
}

// ================================ row_gather ==================================================================
template <int V>
__global__ void gather_fwd_kernel(const bf16* __restrict__ table, const int64_t* __restrict__ ti,
                                  const int64_t* __restrict__ tags, bf16* o0, bf16* o1, bf16* o2, bf16* o3,
                                  bf16* o4, bf16* o5, int H) {
  const int64_t row = blockIdx.x;
  const int nvec = H >> 3;
  const int64_t a = ti[row], b = tags[row];
  const bool ok = a >= 0 && a < 3 && b >= 0 && b < 3;
  const bf16* src = table + (ok ? (a * 3 + b) : 0) * (int64_t)(6 * H);
  bf16* outs[6] = {o0, o1, o2, o3, o4, o5};
  uint4 nan4;
  {
    float f[8];
#pragma unroll
    for (int e = 0; e < 8; ++e) f[e] = kNaN;
    nan4 = pack<8>(f);
  }
#pragma unroll
  for (int j = 0; j < 6; ++j) {
    uint4 v[V];
#pragma unroll
    for (int u = 0; u < V; ++u) {
      const int c = threadIdx.x + u * blockDim.x;
      if (c < nvec) v[u] = ok ? ld<8>(src + j * H + c * 8) : nan4;
    }
#pragma unroll
    for (int u = 0; u < V; ++u) {
      const int c = threadIdx.x + u * blockDim.x;
      if (c < nvec) st<8>(outs[j] + row * H + c * 8, v[u]);
    }
  }
}

// ================================ column kernels ==============================================================
// Accumulate `val` into acc[k] with k warp-uniform (a jump, no predication over all entries).
#define GAT_ACC_CASE(E)                                     \
  case E:                                                   \
    if constexpr (E < NE) {                                 \
      _Pragma("unroll") for (int c = 0; c < CPT; ++c) {     \
        ACC_BODY(E, c)                                      \
      }                                                     \
    }                                                       \
    break;
#define GAT_ACC_SWITCH(k) \
  switch (k) {            \
    GAT_ACC_CASE(0)       \
    GAT_ACC_CASE(1)       \
    GAT_ACC_CASE(2)       \
    GAT_ACC_CASE(3)       \
    GAT_ACC_CASE(4)       \
    GAT_ACC_CASE(5)       \
    GAT_ACC_CASE(6)       \
    GAT_ACC_CASE(7)       \
    GAT_ACC_CASE(8)       \
    default:              \
      break;              \
  }

// Fold the 8 lanes' register sums acc[e][q][c] (NQ quantities, CPT columns a thread) in lane order and write
// the chunk partial ws[chunk][e][q][col] (fp32). 256 threads; buf holds 8 x NQ x 32·CPT floats.
template <int NE, int NQ, int CPT>
__device__ __forceinline__ void fold_lanes(float (&acc)[NE][NQ][CPT], float* buf, float* ws, int64_t ncols,
                                           int64_t col_base) {
  constexpr int W = 32 * CPT;   // columns of the slice
  constexpr int M = NQ * W;     // values per entry
  const int lane = threadIdx.x >> 5, t = threadIdx.x & 31;
#pragma unroll
  for (int e = 0; e < NE; ++e) {
#pragma unroll
    for (int q = 0; q < NQ; ++q)
#pragma unroll
      for (int c = 0; c < CPT; ++c) buf[(lane * NQ + q) * W + t * CPT + c] = acc[e][q][c];
    __syncthreads();
    for (int m = threadIdx.x; m < M; m += blockDim.x) {
      const int q = m / W, cc = m % W;
      float s = buf[q * W + cc];
#pragma unroll
      for (int l = 1; l < kLanes; ++l) s += buf[(l * NQ + q) * W + cc];
      const int64_t col = col_base + cc;
      if (col < ncols) ws[(((int64_t)blockIdx.y * NE + e) * NQ + q) * ncols + col] = s;
    }
    __syncthreads();
  }
}

// The column kernels stage each lane's rows through a cp.async ring in shared memory (kStages rows of each lane in
// flight, no registers held for them). Each thread copies and later reads only its own bytes, so a wait_group is
// the only synchronisation. The row's table index (and rstd) come 32 rows at a time, one per thread, and are
// broadcast with shuffles.
constexpr int kStages = 8;  // power of two

__device__ __forceinline__ void cp_async8(void* smem, const void* gmem) {
  const unsigned sa = (unsigned)__cvta_generic_to_shared(smem);
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8;\n" ::"r"(sa), "l"(gmem));
}
__device__ __forceinline__ void cp_async16(void* smem, const void* gmem) {
  const unsigned sa = (unsigned)__cvta_generic_to_shared(smem);
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(sa), "l"(gmem));
}
__device__ __forceinline__ void cp_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
__device__ __forceinline__ void cp_wait_ring() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kStages - 1) : "memory");
}
__device__ __forceinline__ void cp_wait_all() { asm volatile("cp.async.wait_group 0;\n" ::: "memory"); }

// row_gather backward: d_table[k][col] = sum over rows s with k_s = k of dy_{col / H}[s][col % H]. Columns of
// the 6H-wide table; CPT = 8 (a thread's 8 columns lie within one dy since H % 8 == 0).
template <int NE>
__global__ void __launch_bounds__(256) gather_bwd_col_kernel(const bf16* d0, const bf16* d1, const bf16* d2,
                                                         const bf16* d3, const bf16* d4, const bf16* d5,
                                                         const int64_t* __restrict__ ti,
                                                         const int64_t* __restrict__ tags, int64_t S, int H,
                                                         int64_t L, float* ws) {
  constexpr int CPT = 8, NQ = 1;
  __shared__ float buf[kLanes * NQ * 32 * CPT];
  __shared__ __align__(16) uint4 ring[kLanes][kStages][32];
  const int lane = threadIdx.x >> 5, t = threadIdx.x & 31;
  const int64_t ncols = 6LL * H;
  const int64_t col_base = (int64_t)blockIdx.x * 32 * CPT;
  const int64_t col = col_base + t * CPT;
  const bool colok = col < ncols;
  const int j = colok ? (int)(col / H) : 0;
  const int64_t cin = col - (int64_t)j * H;
  const bf16* dj = j == 0 ? d0 : j == 1 ? d1 : j == 2 ? d2 : j == 3 ? d3 : j == 4 ? d4 : d5;
  const bool active = colok && dj != nullptr;
  float acc[NE][NQ][CPT];
#pragma unroll
  for (int e = 0; e < NE; ++e)
#pragma unroll
    for (int c = 0; c < CPT; ++c) acc[e][0][c] = 0.f;
  const int64_t g = (int64_t)blockIdx.y * kLanes + lane;
  const int64_t r0 = g * L;
  const int64_t r1 = r0 + L < S ? r0 + L : S;
#pragma unroll
  for (int st = 0; st < kStages; ++st) {
    if (active && r0 + st < r1) cp_async16(&ring[lane][st][t], dj + (r0 + st) * H + cin);
    cp_commit();
  }
  int stage = 0;
  for (int64_t base = r0; base < r1; base += 32) {
    int kv = -1;
    if (base + t < r1) {
      const int64_t a = ti[base + t], b = tags[base + t];
      if (a >= 0 && a < 3 && b >= 0 && b < 3) kv = (int)(a * 3 + b);
    }
    const int nrow = (int)(r1 - base < 32 ? r1 - base : 32);
    for (int u = 0; u < nrow; ++u) {
      const int k = __shfl_sync(0xffffffffu, kv, u);
      cp_wait_ring();
      if (active) {
        float f[CPT];
        unpack<8>(ring[lane][stage][t], f);
#define ACC_BODY(E, c) acc[E][0][c] += f[c];
        GAT_ACC_SWITCH(k)
#undef ACC_BODY
        const int64_t nx = base + u + kStages;
        if (nx < r1) cp_async16(&ring[lane][stage][t], dj + nx * H + cin);
      }
      cp_commit();
      stage = (stage + 1) & (kStages - 1);
    }
  }
  cp_wait_all();
  fold_lanes<NE, NQ, CPT>(acc, buf, ws, ncols, col_base);
}

// norm_modulate backward, column part: P[k] = sum dy * x * rstd, Q[k] = sum dy over rows with idx = k.
template <int NE>
__global__ void __launch_bounds__(256) norm_bwd_col_kernel(const bf16* __restrict__ dy, const bf16* __restrict__ x,
                                                       const float* __restrict__ rstd,
                                                       const int64_t* __restrict__ idx, int ne, int64_t S, int H,
                                                       int64_t L, float* ws) {
  constexpr int CPT = 4, NQ = 2;
  __shared__ float buf[kLanes * NQ * 32 * CPT];
  __shared__ __align__(16) uint2 ring[kLanes][kStages][2][32];
  const int lane = threadIdx.x >> 5, t = threadIdx.x & 31;
  const int64_t col_base = (int64_t)blockIdx.x * 32 * CPT;
  const int64_t col = col_base + t * CPT;
  const bool colok = col < H;
  float acc[NE][NQ][CPT];
#pragma unroll
  for (int e = 0; e < NE; ++e)
#pragma unroll
    for (int q = 0; q < NQ; ++q)
#pragma unroll
      for (int c = 0; c < CPT; ++c) acc[e][q][c] = 0.f;
  const int64_t g = (int64_t)blockIdx.y * kLanes + lane;
  const int64_t r0 = g * L;
  const int64_t r1 = r0 + L < S ? r0 + L : S;
#pragma unroll
  for (int st = 0; st < kStages; ++st) {
    if (colok && r0 + st < r1) {
      cp_async8(&ring[lane][st][0][t], x + (r0 + st) * H + col);
      cp_async8(&ring[lane][st][1][t], dy + (r0 + st) * H + col);
    }
    cp_commit();
  }
  int stage = 0;
  for (int64_t base = r0; base < r1; base += 32) {
    int kv = -1;
    float rv = 0.f;
    if (base + t < r1) {
      const int64_t kk = idx[base + t];
      if (kk >= 0 && kk < ne) kv = (int)kk;
      rv = rstd[base + t];
    }
    const int nrow = (int)(r1 - base < 32 ? r1 - base : 32);
    for (int u = 0; u < nrow; ++u) {
      const int k = __shfl_sync(0xffffffffu, kv, u);
      const float rs = __shfl_sync(0xffffffffu, rv, u);
      cp_wait_ring();
      if (colok) {
        float xf[CPT], df[CPT], p[CPT];
        unpack<4>(ring[lane][stage][0][t], xf);
        unpack<4>(ring[lane][stage][1][t], df);
#pragma unroll
        for (int c = 0; c < CPT; ++c) p[c] = df[c] * (xf[c] * rs);
#define ACC_BODY(E, c)  \
  acc[E][0][c] += p[c]; \
  acc[E][1][c] += df[c];
        GAT_ACC_SWITCH(k)
#undef ACC_BODY
        const int64_t nx = base + u + kStages;
        if (nx < r1) {
          cp_async8(&ring[lane][stage][0][t], x + nx * H + col);
          cp_async8(&ring[lane][stage][1][t], dy + nx * H + col);
        }
      }
      cp_commit();
      stage = (stage + 1) & (kStages - 1);
    }
  }
  cp_wait_all();
  fold_lanes<NE, NQ, CPT>(acc, buf, ws, H, col_base);
}

// gate_residual backward: d_y = bf16(dout * gate[k]) per row (as stock), and the column sums
// d_gate[k] = sum dout * y (products exact in fp32).
template <int NE>
__global__ void __launch_bounds__(256) gate_bwd_col_kernel(const bf16* __restrict__ dout, const bf16* __restrict__ y,
                                                       const bf16* __restrict__ gate,
                                                       const int64_t* __restrict__ idx, int64_t S, int H, int64_t L,
                                                       bf16* dyout, bool want_dgate, float* ws) {
  constexpr int CPT = 4, NQ = 1;
  __shared__ float buf[kLanes * NQ * 32 * CPT];
  __shared__ __align__(16) uint2 ring[kLanes][kStages][2][32];
  const int lane = threadIdx.x >> 5, t = threadIdx.x & 31;
  const int64_t col_base = (int64_t)blockIdx.x * 32 * CPT;
  const int64_t col = col_base + t * CPT;
  const bool colok = col < H;
  float acc[NE][NQ][CPT];
#pragma unroll
  for (int e = 0; e < NE; ++e)
#pragma unroll
    for (int c = 0; c < CPT; ++c) acc[e][0][c] = 0.f;
  const int64_t g = (int64_t)blockIdx.y * kLanes + lane;
  const int64_t r0 = g * L;
  const int64_t r1 = r0 + L < S ? r0 + L : S;
#pragma unroll
  for (int s0 = 0; s0 < kStages; ++s0) {
    if (colok && r0 + s0 < r1) {
      cp_async8(&ring[lane][s0][0][t], dout + (r0 + s0) * H + col);
      if (want_dgate) cp_async8(&ring[lane][s0][1][t], y + (r0 + s0) * H + col);
    }
    cp_commit();
  }
  int stage = 0;
  for (int64_t base = r0; base < r1; base += 32) {
    int kv = -1;
    if (base + t < r1) {
      const int64_t kk = idx[base + t];
      if (kk >= 0 && kk < NE) kv = (int)kk;
    }
    const int nrow = (int)(r1 - base < 32 ? r1 - base : 32);
    for (int u = 0; u < nrow; ++u) {
      const int k = __shfl_sync(0xffffffffu, kv, u);
      const int64_t ii = base + u;
      cp_wait_ring();
      if (colok) {
        float of[CPT];
        unpack<4>(ring[lane][stage][0][t], of);
        if (dyout) {
          float gf[CPT], r[CPT];
          if (k >= 0) {
            unpack<4>(ldg<4>(gate + (int64_t)k * H + col), gf);
#pragma unroll
            for (int c = 0; c < CPT; ++c) r[c] = of[c] * gf[c];
          } else {
#pragma unroll
            for (int c = 0; c < CPT; ++c) r[c] = kNaN;
          }
          st<4>(dyout + ii * H + col, pack<4>(r));
        }
        if (want_dgate) {
          float yf[CPT], p[CPT];
          unpack<4>(ring[lane][stage][1][t], yf);
#pragma unroll
          for (int c = 0; c < CPT; ++c) p[c] = of[c] * yf[c];
#define ACC_BODY(E, c) acc[E][0][c] += p[c];
          GAT_ACC_SWITCH(k)
#undef ACC_BODY
        }
        const int64_t nx = ii + kStages;
        if (nx < r1) {
          cp_async8(&ring[lane][stage][0][t], dout + nx * H + col);
          if (want_dgate) cp_async8(&ring[lane][stage][1][t], y + nx * H + col);
        }
      }
      cp_commit();
      stage = (stage + 1) & (kStages - 1);
    }
  }
  cp_wait_all();
  if (want_dgate) fold_lanes<NE, NQ, CPT>(acc, buf, ws, H, col_base);
}

// Fold the C chunk partials in chunk order and round once: out[e][col] = bf16(sum_c ws[c][e][0][col]).
__global__ void fold_plain_kernel(const float* __restrict__ ws, int64_t chunks, int ne, int64_t ncols, bf16* out) {
  const int64_t m = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (m >= ne * ncols) return;
  const int64_t e = m / ncols, col = m % ncols;
  float s = ws[e * ncols + col];
  for (int64_t c = 1; c < chunks; ++c) s += ws[(c * ne + e) * ncols + col];
  out[m] = __float2bfloat16_rn(s);
}

// norm_modulate's fold: P_e, Q_e summed over chunks in order; dsh[e] = bf16(Q_e), dsc[e] = bf16(w * P_e),
// dw = bf16(sum_e (1 + sc[e]) * P_e) with e ascending. dsh/dsc rows have stride `ostride`.
__global__ void fold_norm_kernel(const float* __restrict__ ws, int64_t chunks, int ne, int H,
                                 const bf16* __restrict__ w, const bf16* __restrict__ sc, int64_t tstride, bf16* dw,
                                 bf16* dsh, bf16* dsc, int64_t ostride) {
  const int64_t col = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (col >= H) return;
  const float wv = __bfloat162float(w[col]);
  float dwacc = 0.f;
  for (int e = 0; e < ne; ++e) {
    float P = ws[((int64_t)e * 2 + 0) * H + col];
    float Q = ws[((int64_t)e * 2 + 1) * H + col];
    for (int64_t c = 1; c < chunks; ++c) {
      P += ws[((c * ne + e) * 2 + 0) * H + col];
      Q += ws[((c * ne + e) * 2 + 1) * H + col];
    }
    if (dsh) dsh[e * ostride + col] = __float2bfloat16_rn(Q);
    if (dsc) dsc[e * ostride + col] = __float2bfloat16_rn(wv * P);
    dwacc = fmaf(1.0f + __bfloat162float(sc[e * tstride + col]), P, dwacc);
  }
  if (dw) dw[col] = __float2bfloat16_rn(dwacc);
}

#include "norm_onepass.cuh"

// ================================ norm_modulate row kernels ===================================================
// y = bf16(((x * r) * w) * (1 + sc[k]) + sh[k]), r = 1 / sqrt(sum(x^2) / H + eps), all fp32, one rounding.
template <int V>
__global__ void norm_fwd_kernel(const bf16* __restrict__ x, const bf16* __restrict__ w, const bf16* __restrict__ sh,
                                const bf16* __restrict__ sc, int64_t tstride, const int64_t* __restrict__ idx, int ne,
                                bf16* y, float* rstd, int H, float eps) {
  __shared__ float red[32];
  const int64_t row = blockIdx.x;
  const int nvec = H >> 3;
  const bf16* xr = x + row * H;
  uint4 xv[V];
  float ss = 0.f;
#pragma unroll
  for (int u = 0; u < V; ++u) {
    const int c = threadIdx.x + u * blockDim.x;
    if (c < nvec) xv[u] = ld<8>(xr + c * 8);
  }
#pragma unroll
  for (int u = 0; u < V; ++u) {
    const int c = threadIdx.x + u * blockDim.x;
    if (c < nvec) {
      float f[8];
      unpack<8>(xv[u], f);
#pragma unroll
      for (int e = 0; e < 8; ++e) ss = fmaf(f[e], f[e], ss);
    }
  }
  ss = block_sum(ss, red);
  const float r = 1.0f / sqrtf(ss / (float)H + eps);
  const int64_t k = idx[row];
  const bool ok = k >= 0 && k < ne;
  if (threadIdx.x == 0) rstd[row] = ok ? r : kNaN;
#pragma unroll
  for (int u = 0; u < V; ++u) {
    const int c = threadIdx.x + u * blockDim.x;
    if (c < nvec) {
      float f[8], o[8];
      unpack<8>(xv[u], f);
      if (ok) {
        float wf[8], sf[8], hf[8];
        unpack<8>(ldg<8>(w + c * 8), wf);
        unpack<8>(ldg<8>(sc + k * tstride + c * 8), sf);
        unpack<8>(ldg<8>(sh + k * tstride + c * 8), hf);
#pragma unroll
        for (int e = 0; e < 8; ++e) o[e] = fmaf((f[e] * r) * wf[e], 1.0f + sf[e], hf[e]);
      } else {
#pragma unroll
        for (int e = 0; e < 8; ++e) o[e] = kNaN;
      }
      st<8>(y + row * H + c * 8, pack<8>(o));
    }
  }
}

// dx = r * (g - n * mean(g * n)), g = dy * w * (1 + sc[k]), n = x * r (r saved by the forward).
template <int V>
__global__ void norm_dx_kernel(const bf16* __restrict__ dy, const bf16* __restrict__ x, const bf16* __restrict__ w,
                               const bf16* __restrict__ sc, int64_t tstride, const int64_t* __restrict__ idx, int ne,
                               const float* __restrict__ rstd, bf16* dx, int H) {
  __shared__ float red[32];
  const int64_t row = blockIdx.x;
  const int nvec = H >> 3;
  uint4 xv[V], dv[V];
#pragma unroll
  for (int u = 0; u < V; ++u) {
    const int c = threadIdx.x + u * blockDim.x;
    if (c < nvec) {
      xv[u] = ld<8>(x + row * H + c * 8);
      dv[u] = ld<8>(dy + row * H + c * 8);
    }
  }
  const float r = rstd[row];
  int64_t k = idx[row];
  const bool ok = k >= 0 && k < ne;
  if (!ok) k = 0;
  float dot = 0.f;
#pragma unroll
  for (int u = 0; u < V; ++u) {
    const int c = threadIdx.x + u * blockDim.x;
    if (c < nvec) {
      float xf[8], df[8], wf[8], sf[8];
      unpack<8>(xv[u], xf);
      unpack<8>(dv[u], df);
      unpack<8>(ldg<8>(w + c * 8), wf);
      unpack<8>(ldg<8>(sc + k * tstride + c * 8), sf);
#pragma unroll
      for (int e = 0; e < 8; ++e) dot = fmaf((df[e] * wf[e]) * (1.0f + sf[e]), xf[e] * r, dot);
    }
  }
  dot = block_sum(dot, red);
  const float cmean = dot / (float)H;
#pragma unroll
  for (int u = 0; u < V; ++u) {
    const int c = threadIdx.x + u * blockDim.x;
    if (c < nvec) {
      float xf[8], df[8], wf[8], sf[8], o[8];
      unpack<8>(xv[u], xf);
      unpack<8>(dv[u], df);
      unpack<8>(ldg<8>(w + c * 8), wf);
      unpack<8>(ldg<8>(sc + k * tstride + c * 8), sf);
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        const float gv = (df[e] * wf[e]) * (1.0f + sf[e]);
        o[e] = ok ? r * (gv - (xf[e] * r) * cmean) : kNaN;
      }
      st<8>(dx + row * H + c * 8, pack<8>(o));
    }
  }
}

// ================================ gate_residual forward =======================================================
// out = bf16(res + bf16(gate[k] * y)): the stock path's two roundings (bf16 ops compute in fp32 and round).
template <int V>
__global__ void gate_fwd_kernel(const bf16* __restrict__ res, const bf16* __restrict__ y,
                                const bf16* __restrict__ gate, const int64_t* __restrict__ idx, bf16* out, int H) {
  const int64_t row = blockIdx.x;
  const int nvec = H >> 3;
  const int64_t k = idx[row];
  const bool ok = k >= 0 && k < 9;
  uint4 rv[V], yv[V];
#pragma unroll
  for (int u = 0; u < V; ++u) {
    const int c = threadIdx.x + u * blockDim.x;
    if (c < nvec) {
      rv[u] = ld<8>(res + row * H + c * 8);
      yv[u] = ld<8>(y + row * H + c * 8);
    }
  }
#pragma unroll
  for (int u = 0; u < V; ++u) {
    const int c = threadIdx.x + u * blockDim.x;
    if (c < nvec) {
      float rf[8], yf[8], o[8];
      unpack<8>(rv[u], rf);
      unpack<8>(yv[u], yf);
      if (ok) {
        float gf[8];
        unpack<8>(ldg<8>(gate + k * H + c * 8), gf);
#pragma unroll
        for (int e = 0; e < 8; ++e) {
          const float p = __bfloat162float(__float2bfloat16_rn(__fmul_rn(gf[e], yf[e])));
          o[e] = __fadd_rn(rf[e], p);
        }
      } else {
#pragma unroll
        for (int e = 0; e < 8; ++e) o[e] = kNaN;
      }
      st<8>(out + row * H + c * 8, pack<8>(o));
    }
  }
}

// ================================ host side ===================================================================
int enter(int device, Err err, int len) {
  cudaError_t ce = cudaSetDevice(device);
  if (ce != cudaSuccess) {
    set_err(err, len, "cudaSetDevice(%d): %s", device, cudaGetErrorString(ce));
    return GAT_DEVICE;
  }
  // From CUDA 12 on cudaSetDevice also makes the device's primary context current on this thread (autograd's
  // backward thread may never have touched CUDA). Nothing here is a stream operation or synchronizes, so every
  // entry point is legal during CUDA-graph capture.
  int major = 0, minor = 0;
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device);
  ce = cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device);
  if (ce != cudaSuccess) {
    set_err(err, len, "cudaDeviceGetAttribute: %s", cudaGetErrorString(ce));
    return GAT_DEVICE;
  }
  if (major * 10 + minor != GAT_REQUIRED_CC) {
    set_err(err, len, "library built for compute capability %d.%d; device %d is %d.%d", GAT_REQUIRED_CC / 10,
            GAT_REQUIRED_CC % 10, device, major, minor);
    return GAT_WRONG_ARCH;
  }
  ce = cudaGetLastError();
  if (ce != cudaSuccess) {
    set_err(err, len, "a CUDA error was pending before this call (nothing launched): %s", cudaGetErrorString(ce));
    return GAT_PENDING;
  }
  return GAT_OK;
}

int launched(Err err, int len, const char* what) {
  cudaError_t ce = cudaGetLastError();
  if (ce != cudaSuccess) {
    set_err(err, len, "launch of %s failed: %s", what, cudaGetErrorString(ce));
    return GAT_LAUNCH;
  }
  return GAT_OK;
}

bool misaligned(const void* p) { return p && (reinterpret_cast<uintptr_t>(p) & 15u); }

int check_sizes(int64_t S, int64_t H, Err err, int len) {
  if (S < 1) {
    set_err(err, len, "S must be >= 1 (got %lld)", (long long)S);
    return GAT_BAD_ARGUMENT;
  }
  if (S >= (1LL << 31)) {
    set_err(err, len, "S must be < 2^31 (got %lld)", (long long)S);
    return GAT_BAD_ARGUMENT;
  }
  if (H < 8 || H % 8 || H > 65536) {
    set_err(err, len, "H must be a positive multiple of 8, at most 65536 (got %lld)", (long long)H);
    return GAT_BAD_ARGUMENT;
  }
  return GAT_OK;
}

#define GAT_REQUIRE(cond, ...)         \
  do {                                 \
    if (!(cond)) {                     \
      set_err(err, len, __VA_ARGS__);  \
      return GAT_BAD_ARGUMENT;         \
    }                                  \
  } while (0)

#define GAT_TRY(expr)          \
  do {                         \
    int _rc = (expr);          \
    if (_rc != GAT_OK) return _rc; \
  } while (0)

#define GAT_DISPATCH_V(v, KERNEL, ...)  \
  switch (v) {                          \
    case 1: KERNEL<1> __VA_ARGS__; break; \
    case 2: KERNEL<2> __VA_ARGS__; break; \
    case 3: KERNEL<3> __VA_ARGS__; break; \
    case 4: KERNEL<4> __VA_ARGS__; break; \
    case 6: KERNEL<6> __VA_ARGS__; break; \
    default: KERNEL<8> __VA_ARGS__; break; \
  }

int cmax_norm(int ne) { return ne == 3 ? kCmaxNorm3 : kCmaxNorm9; }

// norm_modulate / final_adaln_out backward: one pass over x and dy (norm_onepass.cuh) where a row fits one CTA
// (H <= 6144); wider rows take two passes (norm_dx_kernel, then the column kernel), other bits of the same sums.
bool norm_onepass(int64_t H) { return onepass_fits(H); }

size_t ws_bytes(int op, int64_t S, int64_t H, int ne) {
  if (S < 1) return 0;
  switch (op) {
    case 0: return (size_t)chunks_for(S, kCmaxGather) * 9 * 6 * H * sizeof(float);
    case 1:
      if (norm_onepass(H)) return onepass_layout(S, H, ne).bytes;
      return (size_t)chunks_for(S, cmax_norm(ne)) * ne * 2 * H * sizeof(float);
    case 2: return (size_t)chunks_for(S, kCmaxGate) * 9 * H * sizeof(float);
    default: return 0;
  }
}

// The one-pass norm backward's four launches (norm_onepass.cuh); ws holds onepass_layout(S, H, ne).bytes.
int norm_bwd_onepass(const bf16* dy, const bf16* x, const bf16* w, const bf16* sc, int64_t tstride,
                     const int64_t* idx, int ne, const float* rstd, bf16* dx, bf16* dw, bf16* dsh, bf16* dsc,
                     int64_t ostride, char* ws, int64_t S, int64_t H, cudaStream_t st, Err err, int len) {
  const OnePassLayout L = onepass_layout(S, H, ne);
  int* counts = (int*)(ws + L.counts);
  int* totals = (int*)(ws + L.totals);
  int* perm = (int*)(ws + L.perm);
  float* tiles = (dw || dsh || dsc) ? (float*)(ws + L.tiles) : nullptr;
  onepass_count_kernel<<<(unsigned)L.nb, 256, 0, st>>>(idx, S, ne, L.cb, counts);
  GAT_TRY(launched(err, len, "onepass_count_kernel"));
  onepass_scatter_kernel<<<(unsigned)L.nb, kScatterThreads, 0, st>>>(idx, S, ne, L.cb, (int)L.nb, counts, totals,
                                                                     perm, dx, (int)H);
  GAT_TRY(launched(err, len, "onepass_scatter_kernel"));
  const int threads = onepass_threads(H);
  int dev = 0, optin = 0;
  cudaGetDevice(&dev);
  cudaError_t ce = cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev);
  if (ce != cudaSuccess) {
    set_err(err, len, "cudaDeviceGetAttribute(MaxSharedMemoryPerBlockOptin): %s", cudaGetErrorString(ce));
    return GAT_DEVICE;
  }
  const int ring = onepass_ring_for(H, (size_t)optin);  // 10 rows where they fit, else 8
  const size_t smem = onepass_smem(threads, ring);
  auto kernel = ring == kOnePassRingDeep ? norm_bwd_onepass_kernel<kOnePassRingDeep>
                                         : norm_bwd_onepass_kernel<kOnePassRing>;
  // Host-side only (no stream work), so legal during graph capture; needed above 48 KB of dynamic shared memory.
  ce = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
  if (ce != cudaSuccess) {
    set_err(err, len, "cudaFuncSetAttribute(norm_bwd_onepass_kernel<%d>, %zu B shared): %s", ring, smem,
            cudaGetErrorString(ce));
    return GAT_LAUNCH;
  }
  kernel<<<kOnePassCtas, threads, smem, st>>>(dy, x, w, sc, tstride, ne, rstd, perm, totals, dx, (int)H,
                                               L.tile_rows, tiles);
  GAT_TRY(launched(err, len, "norm_bwd_onepass_kernel"));
  if (tiles) {
    onepass_fold_kernel<<<(unsigned)((H + 255) / 256), 256, 0, st>>>(tiles, totals, L.tile_rows, ne, (int)H, w, sc,
                                                                      tstride, dw, dsh, dsc, ostride);
    GAT_TRY(launched(err, len, "onepass_fold_kernel"));
  }
  return GAT_OK;
}

}  // namespace

// ================================ C interface =================================================================
GAT_API int gat_abi_version(void) { return GAT_ABI_VERSION; }
GAT_API int gat_required_cc(void) { return GAT_REQUIRED_CC; }
GAT_API const char* gat_status_name(int s) {
  switch (s) {
    case GAT_OK: return "ok";
    case GAT_BAD_ARGUMENT: return "bad_argument";
    case GAT_DEVICE: return "device";
    case GAT_WRONG_ARCH: return "wrong_arch";
    case GAT_LAUNCH: return "launch";
    case GAT_PENDING: return "pending_error";
    default: return "unknown";
  }
}
// op: 0 row_gather, 1 norm_modulate (ne = 9) / final_adaln_out (ne = 3), 2 gate_residual.
GAT_API size_t gat_workspace_bytes(int op, int64_t S, int64_t H, int ne) { return ws_bytes(op, S, H, ne); }
// (chunks C, lane length L) of the column reduction for S tokens: all fold boundaries follow from these.
GAT_API void gat_chunking(int op, int64_t S, int ne, int64_t* chunks, int64_t* lane_len) {
  int cmax = op == 0 ? kCmaxGather : op == 1 ? cmax_norm(ne) : kCmaxGate;
  *chunks = chunks_for(S, cmax);
  *lane_len = lane_rows(S, *chunks);
}
GAT_API int gat_row_threads(int64_t H) { return row_shape(H).threads; }
// The norm backward that runs at H: 2 (one pass, H <= 6144) or 1 (two passes), and the one-pass tiling at S: tile
// rows T, count blocks, tokens a block.
GAT_API int gat_norm_backward_path(int64_t H) { return norm_onepass(H) ? 2 : 1; }
GAT_API void gat_onepass_tiling(int64_t S, int64_t H, int ne, int64_t* tile_rows, int64_t* count_blocks,
                                int64_t* block_tokens) {
  const OnePassLayout L = onepass_layout(S, H, ne);
  *tile_rows = L.tile_rows;
  *count_blocks = L.nb;
  *block_tokens = L.cb;
}
// The ring (rows) a one-pass call at H uses on a device with smem_optin bytes of opt-in shared memory per block.
GAT_API int gat_onepass_ring(int64_t H, int64_t smem_optin) { return onepass_ring_for(H, (size_t)smem_optin); }

GAT_API int gat_row_gather_fwd(const void* table, const int64_t* ti, const int64_t* tags, void* o0, void* o1,
                               void* o2, void* o3, void* o4, void* o5, int64_t S, int64_t H, int device,
                               void* stream, char* err, int len) {
  GAT_TRY(check_sizes(S, H, err, len));
  GAT_REQUIRE(table && ti && tags && o0 && o1 && o2 && o3 && o4 && o5, "null pointer");
  GAT_REQUIRE(!misaligned(table) && !misaligned(o0) && !misaligned(o1) && !misaligned(o2) && !misaligned(o3) &&
                  !misaligned(o4) && !misaligned(o5),
              "table and outputs must be 16-byte aligned");
  GAT_TRY(enter(device, err, len));
  RowShape rs = row_shape(H);
  cudaStream_t st = (cudaStream_t)stream;
  GAT_DISPATCH_V(rs.v, gather_fwd_kernel,
                 <<<(unsigned)S, rs.threads, 0, st>>>((const bf16*)table, ti, tags, (bf16*)o0, (bf16*)o1, (bf16*)o2,
                                                      (bf16*)o3, (bf16*)o4, (bf16*)o5, (int)H));
  return launched(err, len, "gather_fwd_kernel");
}

// d0..d5 may be null (an unused output: zero gradient).
GAT_API int gat_row_gather_bwd(const void* d0, const void* d1, const void* d2, const void* d3, const void* d4,
                               const void* d5, const int64_t* ti, const int64_t* tags, void* d_table, void* ws,
                               size_t ws_size, int64_t S, int64_t H, int device, void* stream, char* err, int len) {
  GAT_TRY(check_sizes(S, H, err, len));
  GAT_REQUIRE(ti && tags && d_table && ws, "null pointer");
  GAT_REQUIRE(!misaligned(d0) && !misaligned(d1) && !misaligned(d2) && !misaligned(d3) && !misaligned(d4) &&
                  !misaligned(d5) && !misaligned(ws),
              "upstream gradients and workspace must be 16-byte aligned");
  const size_t need = ws_bytes(0, S, H, 9);
  GAT_REQUIRE(ws_size >= need, "workspace too small: %zu bytes, need %zu", ws_size, need);
  GAT_TRY(enter(device, err, len));
  cudaStream_t st = (cudaStream_t)stream;
  const int64_t C = chunks_for(S, kCmaxGather), L = lane_rows(S, C);
  const int64_t ncols = 6 * H;
  dim3 grid((unsigned)((ncols + 255) / 256), (unsigned)C);
  gather_bwd_col_kernel<9><<<grid, 256, 0, st>>>((const bf16*)d0, (const bf16*)d1, (const bf16*)d2, (const bf16*)d3,
                                               (const bf16*)d4, (const bf16*)d5, ti, tags, S, (int)H, L, (float*)ws);
  GAT_TRY(launched(err, len, "gather_bwd_col_kernel"));
  const int64_t m = 9 * ncols;
  fold_plain_kernel<<<(unsigned)((m + 255) / 256), 256, 0, st>>>((const float*)ws, C, 9, ncols, (bf16*)d_table);
  return launched(err, len, "fold_plain_kernel");
}

// sh, sc: ne rows of H with row stride tstride (elements); y (S, H); rstd (S,) fp32 (saved for backward).
GAT_API int gat_norm_fwd(const void* x, const void* w, const void* sh, const void* sc, int64_t tstride,
                         const int64_t* idx, int ne, void* y, float* rstd, int64_t S, int64_t H, float eps,
                         int device, void* stream, char* err, int len) {
  GAT_TRY(check_sizes(S, H, err, len));
  GAT_REQUIRE(x && w && sh && sc && idx && y && rstd, "null pointer");
  GAT_REQUIRE(ne == 9 || ne == 3, "ne (table rows) must be 9 or 3 (got %d)", ne);
  GAT_REQUIRE(tstride >= H && tstride % 8 == 0, "table row stride must be >= H and a multiple of 8");
  GAT_REQUIRE(!misaligned(x) && !misaligned(w) && !misaligned(sh) && !misaligned(sc) && !misaligned(y),
              "x, w, sh, sc and y must be 16-byte aligned");
  GAT_TRY(enter(device, err, len));
  RowShape rs = row_shape(H);
  cudaStream_t st = (cudaStream_t)stream;
  GAT_DISPATCH_V(rs.v, norm_fwd_kernel,
                 <<<(unsigned)S, rs.threads, 0, st>>>((const bf16*)x, (const bf16*)w, (const bf16*)sh,
                                                      (const bf16*)sc, tstride, idx, ne, (bf16*)y, rstd, (int)H, eps));
  return launched(err, len, "norm_fwd_kernel");
}

// Any of dx, dw, dsh, dsc may be null (not wanted); dsh/dsc rows have stride ostride.
GAT_API int gat_norm_bwd(const void* dy, const void* x, const void* w, const void* sc, int64_t tstride,
                         const int64_t* idx, int ne, const float* rstd, void* dx, void* dw, void* dsh, void* dsc,
                         int64_t ostride, void* ws, size_t ws_size, int64_t S, int64_t H, int device, void* stream,
                         char* err, int len) {
  GAT_TRY(check_sizes(S, H, err, len));
  GAT_REQUIRE(dy && x && w && sc && idx && rstd, "null pointer");
  GAT_REQUIRE(ne == 9 || ne == 3, "ne (table rows) must be 9 or 3 (got %d)", ne);
  GAT_REQUIRE(tstride >= H && tstride % 8 == 0, "table row stride must be >= H and a multiple of 8");
  GAT_REQUIRE(!(dsh || dsc) || ostride >= H, "output row stride must be >= H");
  GAT_REQUIRE(!misaligned(dy) && !misaligned(x) && !misaligned(w) && !misaligned(sc) && !misaligned(dx) &&
                  !misaligned(ws),
              "dy, x, w, sc, dx and workspace must be 16-byte aligned");
  const bool want_col = dw || dsh || dsc;
  const bool onepass = norm_onepass(H) && (dx || want_col);
  const size_t need = (want_col || onepass) ? ws_bytes(1, S, H, ne) : 0;
  GAT_REQUIRE(need == 0 || (ws && ws_size >= need), "workspace too small: %zu bytes, need %zu", ws_size, need);
  GAT_TRY(enter(device, err, len));
  cudaStream_t st = (cudaStream_t)stream;
  if (onepass) return norm_bwd_onepass((const bf16*)dy, (const bf16*)x, (const bf16*)w, (const bf16*)sc, tstride, idx,
                                       ne, rstd, (bf16*)dx, (bf16*)dw, (bf16*)dsh, (bf16*)dsc, ostride, (char*)ws, S,
                                       H, st, err, len);
  if (dx) {
    RowShape rs = row_shape(H);
    GAT_DISPATCH_V(rs.v, norm_dx_kernel,
                   <<<(unsigned)S, rs.threads, 0, st>>>((const bf16*)dy, (const bf16*)x, (const bf16*)w,
                                                        (const bf16*)sc, tstride, idx, ne, rstd, (bf16*)dx, (int)H));
    GAT_TRY(launched(err, len, "norm_dx_kernel"));
  }
  if (want_col) {
    const int64_t C = chunks_for(S, cmax_norm(ne)), L = lane_rows(S, C);
    dim3 grid((unsigned)((H + 127) / 128), (unsigned)C);
    const bf16 *dyp = (const bf16*)dy, *xp = (const bf16*)x;
    float* wsp = (float*)ws;
    if (ne == 9)
      norm_bwd_col_kernel<9><<<grid, 256, 0, st>>>(dyp, xp, rstd, idx, ne, S, (int)H, L, wsp);
    else
      norm_bwd_col_kernel<3><<<grid, 256, 0, st>>>(dyp, xp, rstd, idx, ne, S, (int)H, L, wsp);
    GAT_TRY(launched(err, len, "norm_bwd_col_kernel"));
    fold_norm_kernel<<<(unsigned)((H + 255) / 256), 256, 0, st>>>((const float*)ws, C, ne, (int)H, (const bf16*)w,
                                                                  (const bf16*)sc, tstride, (bf16*)dw, (bf16*)dsh,
                                                                  (bf16*)dsc, ostride);
    GAT_TRY(launched(err, len, "fold_norm_kernel"));
  }
  return GAT_OK;
}

GAT_API int gat_gate_fwd(const void* res, const void* y, const void* gate, const int64_t* idx, void* out, int64_t S,
                         int64_t H, int device, void* stream, char* err, int len) {
  GAT_TRY(check_sizes(S, H, err, len));
  GAT_REQUIRE(res && y && gate && idx && out, "null pointer");
  GAT_REQUIRE(!misaligned(res) && !misaligned(y) && !misaligned(gate) && !misaligned(out),
              "res, y, gate and out must be 16-byte aligned");
  GAT_TRY(enter(device, err, len));
  RowShape rs = row_shape(H);
  cudaStream_t st = (cudaStream_t)stream;
  GAT_DISPATCH_V(rs.v, gate_fwd_kernel,
                 <<<(unsigned)S, rs.threads, 0, st>>>((const bf16*)res, (const bf16*)y, (const bf16*)gate, idx,
                                                      (bf16*)out, (int)H));
  return launched(err, len, "gate_fwd_kernel");
}

// d_y and/or d_gate (either may be null). d_res is the upstream gradient itself (Python returns it).
GAT_API int gat_gate_bwd(const void* dout, const void* y, const void* gate, const int64_t* idx, void* dyout,
                         void* dgate, void* ws, size_t ws_size, int64_t S, int64_t H, int device, void* stream,
                         char* err, int len) {
  GAT_TRY(check_sizes(S, H, err, len));
  GAT_REQUIRE(dout && y && gate && idx, "null pointer");
  GAT_REQUIRE(!misaligned(dout) && !misaligned(y) && !misaligned(gate) && !misaligned(dyout) && !misaligned(ws),
              "dout, y, gate, d_y and workspace must be 16-byte aligned");
  const size_t need = dgate ? ws_bytes(2, S, H, 9) : 0;
  GAT_REQUIRE(!dgate || (ws && ws_size >= need), "workspace too small: %zu bytes, need %zu", ws_size, need);
  if (!dyout && !dgate) return GAT_OK;
  GAT_TRY(enter(device, err, len));
  cudaStream_t st = (cudaStream_t)stream;
  const int64_t C = chunks_for(S, kCmaxGate), L = lane_rows(S, C);
  dim3 grid((unsigned)((H + 127) / 128), (unsigned)C);
  gate_bwd_col_kernel<9><<<grid, 256, 0, st>>>((const bf16*)dout, (const bf16*)y, (const bf16*)gate, idx, S, (int)H,
                                             L, (bf16*)dyout, dgate != nullptr, (float*)ws);
  GAT_TRY(launched(err, len, "gate_bwd_col_kernel"));
  if (dgate) {
    const int64_t m = 9 * H;
    fold_plain_kernel<<<(unsigned)((m + 255) / 256), 256, 0, st>>>((const float*)ws, C, 9, H, (bf16*)dgate);
    GAT_TRY(launched(err, len, "fold_plain_kernel"));
  }
  return GAT_OK;
}
