// Bundled timestep MLP (issue 43): y = linear(silu(linear(x, w1, b1)), w2, b2) in fp32, forward and backward
// (dx, dw1, db1, dw2, db2). Plain C interface (extern "C", raw pointers, sizes, device index, cudaStream_t in; a
// status and a message out), loaded from Python with ctypes. x (T, F), w1 (H, F), b1 (H), w2 (D, H), b2 (D).
//
// Invariance by construction:
//  * every product is a 3xTF32 GEMM (gemm_3xtf32.cuh) with the weights on M and the T rows on N; an element's bits
//    depend on its k-step sequence only, which is the same for every tile configuration and for the weight-streaming
//    kernel of small T (row_stream.cu), so the path may follow T;
//  * the long reductions of the row products (y: K = H, d_act: K = D, dx: K = H) are cut into a fixed number of
//    K slices that depends on the shape only (split_count), each slice a GEMM, folded in slice order by an
//    elementwise kernel that also adds the bias / applies SiLU's derivative: no atomics, nothing that follows T;
//  * the weight and bias gradients sum over T in ascending order (an FFMA kernel for T <= kFfmaDwMaxT, the 3xTF32
//    GEMM with K = T above; the bias sums in fixed strided lanes folded in lane order): repeatable run to run.
#include <cuda_runtime.h>

#include <cstdarg>
#include <cstdint>
#include <cstdio>

#include "gemm_3xtf32.cuh"

#define TMLP_API extern "C" __attribute__((visibility("default")))
#define TMLP_ABI_VERSION 1

#ifndef TMLP_REQUIRED_CC
#error "define TMLP_REQUIRED_CC (e.g. 90 for sm_90a, 100 for sm_100a)"
#endif

enum TmlpStatus {
  TMLP_OK = 0,
  TMLP_BAD_ARGUMENT = 1,  // a size, pointer, alignment or workspace the kernels do not take (nothing launched)
  TMLP_DEVICE = 10,       // cudaSetDevice / attribute query failed
  TMLP_WRONG_ARCH = 11,   // the library was built for another compute capability
  TMLP_LAUNCH = 12,       // a kernel failed to launch
  TMLP_GEMM = 13,         // a CUTLASS GEMM refused or failed to launch
  TMLP_PENDING = 15,      // a CUDA error was pending before the call (nothing launched)
};

namespace {

typedef char* Err;

constexpr int kKStep = 32;        // the GEMMs' k tile: every K and every K slice is a multiple of it
#ifndef TMLP_SPLIT_Y
#define TMLP_SPLIT_Y 8
#endif
#ifndef TMLP_SPLIT_DACT
#define TMLP_SPLIT_DACT 4
#endif
constexpr int kSplitY = TMLP_SPLIT_Y;        // K slices of y = a W2^T (K = H), at most
constexpr int kSplitDact = TMLP_SPLIT_DACT;  // of d_act = dY W2 (K = D)
constexpr int kSplitDx = 42;      // of dx = dh W1 (K = H; M = F = 256 has few tiles, the slices give the CTAs)
constexpr int kFfmaDwMaxT = 32;   // weight gradients by FFMA up to this T (write-bound), by the GEMM above
constexpr int kStreamMaxT = 16;   // row GEMMs by row_stream.cu's weight-streaming kernel up to this T
constexpr int kSmallMaxT = 32;    // row GEMM tile configurations by T (same bits in each, gemm_3xtf32.cuh)
constexpr int kMidMaxT = 128;
constexpr int kWideMaxT = 1024;
constexpr int kSumLanes = 32;     // bias gradients: 32 strided lanes of rows, folded in lane order

int g_forced_config = -1;  // tmlp_force_config: -1 = by T (the default), else one GemmConfig for every T
int g_large_variant = 0;   // tmlp_set_large_variant

void set_err(Err err, int len, const char* fmt, ...) {
  if (!err || len <= 0) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, (size_t)len, fmt, ap);
  va_end(ap);
}

// Largest s <= want with K / kKStep divisible by s: the slice count of a product of depth K (shape only, never T).
int split_count(int64_t K, int want) {
  const int64_t steps = K / kKStep;
  for (int s = (int)(want < steps ? want : steps); s > 1; --s)
    if (steps % s == 0) return s;
  return 1;
}

int config_for(int64_t T) {
  if (g_forced_config >= 0) return g_forced_config;
  if (T <= kStreamMaxT) return tmlp::kStream;
  if (T <= kSmallMaxT) return tmlp::kSmallN;
  if (T <= kMidMaxT) return tmlp::kMidN;
  return T <= kWideMaxT ? tmlp::kWideN : tmlp::kLargeN;
}

size_t fwd_ws_floats(int64_t T, int64_t H, int64_t D) { return (size_t)split_count(H, kSplitY) * T * D; }
size_t bwd_ws_floats(int64_t T, int64_t F, int64_t H, int64_t D) {
  return (size_t)split_count(D, kSplitDact) * T * H + (size_t)split_count(H, kSplitDx) * T * F;
}

__device__ __forceinline__ float sigmoid(float v) { return 1.0f / (1.0f + expf(-v)); }

// h += b (broadcast over rows of `cols` floats), a = silu(h) = h / (1 + exp(-h)) (torch's formula); float4 wide.
__global__ void bias_silu_kernel(float4* h, float4* a, const float4* __restrict__ b, int64_t n4, int cols4) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n4; i += (int64_t)gridDim.x * blockDim.x) {
    float4 v = h[i];
    const float4 bb = b[i % cols4];
    v.x += bb.x, v.y += bb.y, v.z += bb.z, v.w += bb.w;
    h[i] = v;
    a[i] = make_float4(v.x / (1.0f + expf(-v.x)), v.y / (1.0f + expf(-v.y)), v.z / (1.0f + expf(-v.z)),
                       v.w / (1.0f + expf(-v.w)));
  }
}

// out = ((P_0 + P_1) + ...) + P_{S-1} (+ bias broadcast over rows): the K slices folded in slice order.
// `out` may be P_0 (each element is read before it is written, by the same thread).
__global__ void fold_kernel(const float4* p, int slices, int64_t n4, const float4* __restrict__ bias, int cols4,
                            float4* out) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n4; i += (int64_t)gridDim.x * blockDim.x) {
    float4 v = p[i];
    for (int s = 1; s < slices; ++s) {
      const float4 q = p[s * n4 + i];
      v.x += q.x, v.y += q.y, v.z += q.z, v.w += q.w;
    }
    if (bias) {
      const float4 bb = bias[i % cols4];
      v.x += bb.x, v.y += bb.y, v.z += bb.z, v.w += bb.w;
    }
    out[i] = v;
  }
}

__device__ __forceinline__ float dsilu(float g, float h) {
  const float s = sigmoid(h);
  return g * (s * (1.0f + h * (1.0f - s)));  // torch's silu_backward
}

// dh = (slices of d_act folded in order) * silu'(h); out may be P_0.
__global__ void fold_dsilu_kernel(const float4* p, int slices, int64_t n4, const float4* __restrict__ h,
                                  float4* out) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n4; i += (int64_t)gridDim.x * blockDim.x) {
    float4 v = p[i];
    for (int s = 1; s < slices; ++s) {
      const float4 q = p[s * n4 + i];
      v.x += q.x, v.y += q.y, v.z += q.z, v.w += q.w;
    }
    const float4 hh = h[i];
    out[i] = make_float4(dsilu(v.x, hh.x), dsilu(v.y, hh.y), dsilu(v.z, hh.z), dsilu(v.w, hh.w));
  }
}

// out[c] = sum over rows t of m[t][c], in fp64, rounded once: thread (lane g, column c) adds rows g, g + 32, ... in
// ascending order, the 32 lane sums are folded in lane order. Block (32 columns, kSumLanes lanes).
__global__ void column_sum_kernel(const float* __restrict__ m, int64_t rows, int cols, float* __restrict__ out) {
  __shared__ double part[kSumLanes][33];
  const int c = blockIdx.x * 32 + threadIdx.x;
  double acc = 0.0;
  if (c < cols) {
#pragma unroll 8
    for (int64_t t = threadIdx.y; t < rows; t += kSumLanes) acc += (double)m[t * cols + c];
  }
  part[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y == 0 && c < cols) {
    double s = part[0][threadIdx.x];
    for (int g = 1; g < kSumLanes; ++g) s += part[g][threadIdx.x];
    out[c] = (float)s;
  }
}

// dW (M x N, row-major) = U^T V with U (T x M), V (T x N): FFMA in ascending t, 4 rows x 4 columns a thread.
constexpr int kDwThreads = 128;
__global__ void dw_ffma_kernel(const float* __restrict__ u, const float4* __restrict__ v, int64_t T, int M, int N4,
                               float4* __restrict__ w) {
  const int j = blockIdx.x * kDwThreads + threadIdx.x;
  const int i0 = blockIdx.y * 4;
  if (j >= N4) return;
  float4 acc[4];
#pragma unroll
  for (int r = 0; r < 4; ++r) acc[r] = make_float4(0.f, 0.f, 0.f, 0.f);
  for (int64_t t = 0; t < T; ++t) {
    const float4 vv = v[t * N4 + j];
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      const float uu = u[t * M + i0 + r];
      acc[r].x = fmaf(uu, vv.x, acc[r].x);
      acc[r].y = fmaf(uu, vv.y, acc[r].y);
      acc[r].z = fmaf(uu, vv.z, acc[r].z);
      acc[r].w = fmaf(uu, vv.w, acc[r].w);
    }
  }
#pragma unroll
  for (int r = 0; r < 4; ++r) w[(int64_t)(i0 + r) * N4 + j] = acc[r];
}

unsigned grid_for(int64_t n4) {
  const int64_t blocks = (n4 + 255) / 256;
  return (unsigned)(blocks < 132 * 16 ? blocks : 132 * 16);
}

int enter(int device, Err err, int len) {
  cudaError_t ce = cudaSetDevice(device);  // also makes the primary context current on a thread new to CUDA
  if (ce != cudaSuccess) {
    set_err(err, len, "cudaSetDevice(%d): %s", device, cudaGetErrorString(ce));
    return TMLP_DEVICE;
  }
  int major = 0, minor = 0;
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device);
  ce = cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device);
  if (ce != cudaSuccess) {
    set_err(err, len, "cudaDeviceGetAttribute: %s", cudaGetErrorString(ce));
    return TMLP_DEVICE;
  }
  if (major * 10 + minor != TMLP_REQUIRED_CC) {
    set_err(err, len, "library built for compute capability %d.%d; device %d is %d.%d", TMLP_REQUIRED_CC / 10,
            TMLP_REQUIRED_CC % 10, device, major, minor);
    return TMLP_WRONG_ARCH;
  }
  ce = cudaGetLastError();
  if (ce != cudaSuccess) {
    set_err(err, len, "a CUDA error was pending before the call: %s", cudaGetErrorString(ce));
    return TMLP_PENDING;
  }
  return TMLP_OK;
}

int launched(Err err, int len, const char* what) {
  cudaError_t ce = cudaGetLastError();
  if (ce != cudaSuccess) {
    set_err(err, len, "launch of %s failed: %s", what, cudaGetErrorString(ce));
    return TMLP_LAUNCH;
  }
  return TMLP_OK;
}

int gemm_done(int rc, const char* gemm, const char* what, Err err, int len) {
  if (rc == 0) return TMLP_OK;
  if (rc >= 1000)
    set_err(err, len, "GEMM %s: %s failed: %s", gemm, what, cudaGetErrorString((cudaError_t)(rc - 1000)));
  else
    set_err(err, len, "GEMM %s: CUTLASS %s returned status %d", gemm, what, rc);
  return TMLP_GEMM;
}

bool misaligned(const void* p) { return reinterpret_cast<uintptr_t>(p) & 15u; }

int check_sizes(int64_t T, int64_t F, int64_t H, int64_t D, Err err, int len) {
  if (T < 1 || T >= (1LL << 31) / 8) {
    set_err(err, len, "T must be in [1, 2^28) (got %lld)", (long long)T);
    return TMLP_BAD_ARGUMENT;
  }
  const int64_t sizes[3] = {F, H, D};
  for (int64_t s : sizes) {
    if (s < kKStep || s % kKStep || s > (1 << 20)) {
      set_err(err, len, "F, H and D must be positive multiples of %d, at most 2^20 (got F=%lld H=%lld D=%lld)",
              kKStep, (long long)F, (long long)H, (long long)D);
      return TMLP_BAD_ARGUMENT;
    }
  }
  return TMLP_OK;
}

#define TMLP_TRY(expr)              \
  do {                              \
    int _rc = (expr);               \
    if (_rc != TMLP_OK) return _rc; \
  } while (0)

#define TMLP_REQUIRE(cond, ...)         \
  do {                                  \
    if (!(cond)) {                      \
      set_err(err, len, __VA_ARGS__);   \
      return TMLP_BAD_ARGUMENT;         \
    }                                   \
  } while (0)

// D (M x T, column-major = T x M row-major) = A . act^T in `slices` fixed K slices written one after another.
// With `bias` (one slice): then out += bias, silu_out = silu(out), fused into the streaming kernel or a kernel after.
int row_gemm(bool weight_transposed, int config, int64_t M, int64_t T, int64_t K, int slices, const float* w,
             const float* act, float* out, cudaStream_t st, const char* name, Err err, int len,
             const float* bias = nullptr, float* silu_out = nullptr) {
  const int64_t ks = K / slices;
  tmlp::BatchedGemm g{};
  g.m = (int)M, g.n = (int)T, g.k = (int)ks, g.batches = slices;
  g.a = w;
  // weight (M rows of K) row-major, or (K rows of M) read as M x K column-major
  g.lda = weight_transposed ? M : K;
  g.stride_a = weight_transposed ? ks * M : ks;
  g.b = act, g.ldb = K, g.stride_b = ks;
  g.d = out, g.ldd = M, g.stride_d = M * T;
  const char* what = "";
  if (config == tmlp::kStream) {
    if (tmlp::row_stream_fits(weight_transposed, g))
      return gemm_done(tmlp::row_stream(weight_transposed, g, bias, silu_out, st, &what), name, what, err, len);
    config = tmlp::kSmallN;  // a shape it does not take: the CUTLASS tile for small T (same bits)
  }
  int rc = weight_transposed ? tmlp::gemm_nn(config, g, st, &what) : tmlp::gemm_tn(config, g, st, &what);
  TMLP_TRY(gemm_done(rc, name, what, err, len));
  if (!bias) return TMLP_OK;
  bias_silu_kernel<<<grid_for(T * M / 4), 256, 0, st>>>((float4*)out, (float4*)silu_out, (const float4*)bias,
                                                        T * M / 4, (int)(M / 4));
  return launched(err, len, "bias_silu_kernel");
}

// dW (M x N row-major) = U^T V, U (T x M), V (T x N), summed over T in ascending order.
int weight_grad(const float* u, const float* v, int64_t T, int64_t M, int64_t N, float* dw, cudaStream_t st,
                const char* name, Err err, int len) {
  if (T <= kFfmaDwMaxT) {
    const int n4 = (int)(N / 4);
    dim3 grid((unsigned)((n4 + kDwThreads - 1) / kDwThreads), (unsigned)(M / 4));
    dw_ffma_kernel<<<grid, kDwThreads, 0, st>>>(u, (const float4*)v, T, (int)M, n4, (float4*)dw);
    return launched(err, len, name);
  }
  tmlp::BatchedGemm g{};
  g.m = (int)M, g.n = (int)N, g.k = (int)T, g.batches = 1;
  g.a = u, g.lda = M, g.b = v, g.ldb = N, g.d = dw, g.ldd = N;
  const char* what = "";
  return gemm_done(tmlp::gemm_dw(g, st, &what), name, what, err, len);
}

int column_sum(const float* m, int64_t rows, int64_t cols, float* out, cudaStream_t st, Err err, int len) {
  column_sum_kernel<<<(unsigned)((cols + 31) / 32), dim3(32, kSumLanes), 0, st>>>(m, rows, (int)cols, out);
  return launched(err, len, "column_sum_kernel");
}

}  // namespace

int tmlp::large_variant() { return g_large_variant; }

// ================================ C interface =================================================================
TMLP_API int tmlp_abi_version(void) { return TMLP_ABI_VERSION; }
TMLP_API int tmlp_required_cc(void) { return TMLP_REQUIRED_CC; }
TMLP_API const char* tmlp_status_name(int s) {
  switch (s) {
    case TMLP_OK: return "ok";
    case TMLP_BAD_ARGUMENT: return "bad_argument";
    case TMLP_DEVICE: return "device";
    case TMLP_WRONG_ARCH: return "wrong_arch";
    case TMLP_LAUNCH: return "launch";
    case TMLP_GEMM: return "gemm";
    case TMLP_PENDING: return "pending_error";
    default: return "unknown";
  }
}
TMLP_API size_t tmlp_forward_workspace_bytes(int64_t T, int64_t F, int64_t H, int64_t D) {
  (void)F;
  return T < 1 ? 0 : fwd_ws_floats(T, H, D) * sizeof(float);
}
TMLP_API size_t tmlp_backward_workspace_bytes(int64_t T, int64_t F, int64_t H, int64_t D) {
  return T < 1 ? 0 : bwd_ws_floats(T, F, H, D) * sizeof(float);
}
// The K slices of y, d_act and dx at these sizes (functions of the shape only).
TMLP_API void tmlp_splits(int64_t F, int64_t H, int64_t D, int* y, int* dact, int* dx) {
  (void)F;
  *y = split_count(H, kSplitY);
  *dact = split_count(D, kSplitDact);
  *dx = split_count(H, kSplitDx);
}
// The row GEMMs' configuration at T (4 streaming, 0 small, 1 mid, 3 wide, 2 large).
TMLP_API int tmlp_config_for(int64_t T) { return config_for(T); }
// -1: by T (the default); 0..4: that configuration at every T (to prove the bits do not depend on it).
// Process-wide; returns the previous value, or -2 (nothing changed) for anything else.
TMLP_API int tmlp_force_config(int c) {
  if (c < -1 || c > 4) return -2;
  const int old = g_forced_config;
  g_forced_config = c;
  return old;
}

// The large-T tile variant (gemm_3xtf32.cuh): 0, 1 or 2; process-wide; returns the previous, or -2 (refused).
TMLP_API int tmlp_set_large_variant(int v) {
  if (v < 0 || v > 2) return -2;
  const int old = g_large_variant;
  g_large_variant = v;
  return old;
}

// Forward. Writes h = x w1^T + b1 and a = silu(h) (T x H, kept for the backward) and y (T x D).
TMLP_API int tmlp_forward(const float* x, const float* w1, const float* b1, const float* w2, const float* b2,
                          float* h, float* a, float* y, void* ws, size_t ws_bytes, int64_t T, int64_t F, int64_t H,
                          int64_t D, int device, void* stream, char* err, int len) {
  TMLP_TRY(check_sizes(T, F, H, D, err, len));
  const void* ptrs[9] = {x, w1, b1, w2, b2, h, a, y, ws};
  for (const void* p : ptrs) TMLP_REQUIRE(p && !misaligned(p), "a null or not 16-byte aligned pointer");
  TMLP_REQUIRE(ws_bytes >= fwd_ws_floats(T, H, D) * sizeof(float), "workspace of %zu bytes, %zu needed", ws_bytes,
               fwd_ws_floats(T, H, D) * sizeof(float));
  TMLP_TRY(enter(device, err, len));
  cudaStream_t st = (cudaStream_t)stream;
  const int config = config_for(T);
  float* parts = (float*)ws;
  TMLP_TRY(row_gemm(false, config, H, T, F, 1, w1, x, h, st, "h = x w1^T", err, len, b1, a));
  const int sy = split_count(H, kSplitY);
  TMLP_TRY(row_gemm(false, config, D, T, H, sy, w2, a, parts, st, "y = a w2^T", err, len));
  fold_kernel<<<grid_for(T * D / 4), 256, 0, st>>>((const float4*)parts, sy, T * D / 4, (const float4*)b2,
                                                   (int)(D / 4), (float4*)y);
  return launched(err, len, "fold_kernel (y)");
}

// Backward from dy (T x D) and the forward's h, a: dx (T x F), dw1 (H x F), db1 (H), dw2 (D x H), db2 (D).
TMLP_API int tmlp_backward(const float* dy, const float* x, const float* w1, const float* w2, const float* h,
                           const float* a, float* dx, float* dw1, float* db1, float* dw2, float* db2, void* ws,
                           size_t ws_bytes, int64_t T, int64_t F, int64_t H, int64_t D, int device, void* stream,
                           char* err, int len) {
  TMLP_TRY(check_sizes(T, F, H, D, err, len));
  const void* ptrs[12] = {dy, x, w1, w2, h, a, dx, dw1, db1, dw2, db2, ws};
  for (const void* p : ptrs) TMLP_REQUIRE(p && !misaligned(p), "a null or not 16-byte aligned pointer");
  TMLP_REQUIRE(ws_bytes >= bwd_ws_floats(T, F, H, D) * sizeof(float), "workspace of %zu bytes, %zu needed",
               ws_bytes, bwd_ws_floats(T, F, H, D) * sizeof(float));
  TMLP_TRY(enter(device, err, len));
  cudaStream_t st = (cudaStream_t)stream;
  const int config = config_for(T);
  const int sa = split_count(D, kSplitDact), sx = split_count(H, kSplitDx);
  float* dact = (float*)ws;             // sa slices of T x H; dh overwrites slice 0
  float* dxp = dact + (size_t)sa * T * H;  // sx slices of T x F
  TMLP_TRY(row_gemm(true, config, H, T, D, sa, w2, dy, dact, st, "d_act = dy w2", err, len));
  fold_dsilu_kernel<<<grid_for(T * H / 4), 256, 0, st>>>((const float4*)dact, sa, T * H / 4, (const float4*)h,
                                                         (float4*)dact);
  TMLP_TRY(launched(err, len, "fold_dsilu_kernel"));
  const float* dh = dact;
  TMLP_TRY(row_gemm(true, config, F, T, H, sx, w1, dh, dxp, st, "dx = dh w1", err, len));
  fold_kernel<<<grid_for(T * F / 4), 256, 0, st>>>((const float4*)dxp, sx, T * F / 4, nullptr, 1, (float4*)dx);
  TMLP_TRY(launched(err, len, "fold_kernel (dx)"));
  TMLP_TRY(weight_grad(dy, a, T, D, H, dw2, st, "dw2 = dy^T a", err, len));
  TMLP_TRY(column_sum(dy, T, D, db2, st, err, len));
  TMLP_TRY(weight_grad(dh, x, T, H, F, dw1, st, "dw1 = dh^T x", err, len));
  return column_sum(dh, T, H, db1, st, err, len);
}
