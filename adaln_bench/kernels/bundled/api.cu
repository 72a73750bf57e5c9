// Plain C interface of the bundled AdaLN projection kernel (one shared library per code path).
// Raw pointers, sizes, the device index and a cudaStream_t in; an AdalnStatus out (0 = ok, names in status.h)
// and a message in `err`. No torch, no C++ ABI across the boundary. Every entry point first makes the
// device's primary context current on the calling thread (autograd runs backward in a thread of its own
// that may never have touched CUDA), and launches nothing after a failed step. Elementwise kernels (SiLU, the
// fixed-order fold of the d_act chunk or group sums fused with silu', the db column sum) live here and are shared
// by both paths.
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdarg>
#include <cstdint>
#include <cstdio>

#include "gemms.h"
#include "pdl.cuh"
#include "status.h"

#if defined(ADALN_PATH_SM90)
#include "sm90_config.h"
#define ADALN_PATH_NAME "sm90 wgmma (CUTLASS 3 TMA warp-specialized, cooperative and pingpong, swap-AB)"
#define ADALN_CONFIG ADALN_SM90_CONFIG
#elif defined(ADALN_PATH_PORTABLE)
#include "portable_config.h"
#define ADALN_PATH_NAME "portable mma.sync (CUTLASS 2 GemmUniversal, sm80+)"
#define ADALN_STR2(x) #x
#define ADALN_STR(x) ADALN_STR2(x)
// Per GEMM and tier: the tile (T x columns x k), the warp tile and the cp.async stages.
#define ADALN_CONFIG                                                                                              \
  "fwd / d_act up to 64 rows 64x256x32 (" ADALN_STR(ADALN_PORTABLE_SMALL_FWD_WM) "x64, " ADALN_STR(              \
      ADALN_PORTABLE_SMALL_FWD_STAGES) " stages) / 64x128x32 (32x64, " ADALN_STR(ADALN_PORTABLE_SMALL_DACT_STAGES) \
  "), up to " ADALN_STR(ADALN_PORTABLE_MID_MAX) " 128x128x32 (" ADALN_STR(ADALN_PORTABLE_MID_FWD_WM) "x64, "       \
  ADALN_STR(ADALN_PORTABLE_MID_FWD_STAGES) ") / 128x128x32 (" ADALN_STR(ADALN_PORTABLE_MID_DACT_WM) "x64, "        \
  ADALN_STR(ADALN_PORTABLE_MID_DACT_STAGES) "), above: ADALN_PORTABLE_TIERS=" ADALN_STR(ADALN_PORTABLE_TIERS)     \
  " (2: 256x128x32 (64x64, " ADALN_STR(ADALN_PORTABLE_LARGE_FWD_STAGES) ") / 256x128x32 (64x64, " ADALN_STR(       \
      ADALN_PORTABLE_LARGE_DACT_STAGES) ")), odd 128-row tile counts up to " ADALN_STR(ADALN_PORTABLE_ODD_MAX)  \
  " on the middle tier; dW 128x128x32 (64x64, " ADALN_STR(ADALN_PORTABLE_DW_STAGES) ") order "                 \
      ADALN_STR(ADALN_PORTABLE_DW_SWIZZLE)                                                                      \
  "; dW on CUDA cores for T<=" ADALN_STR(ADALN_DW_SIMT_MAX) "; d_act T block " ADALN_STR(ADALN_T_BLOCK)
#else
#error "define ADALN_PATH_SM90 or ADALN_PATH_PORTABLE"
#endif

// dW, a 520 MB write with little arithmetic at small T (git:NOTES.md, v3 run 3 and v8 runs 9-12): on CUDA cores
// (dw_small_t) for T <= ADALN_DW_SIMT_MAX, then on tensor cores outside a GEMM (dw_mma.cu, a row-ordered store
// stream) up to ADALN_DW_MMA_MAX (<= 256), then the dW GEMM (0 = off for either).
// Shipped: CUDA cores at T = 1 on both paths; dw_mma up to T = 12 on the sm90 path (dW 130-135 µs against its
// GEMM's 139-142 at T <= 4; forward + backward 1-8 µs faster at T = 5-12 in v13's runs 28-29; from T = 16 on the
// GEMM is as fast or faster, at T = 128 305 against 174) and up to 256 on the portable
// path (v8 up to 64: 148-161 µs against CUTLASS 2's 249-298, and 130-135 against the CUDA-core kernel's 137-177
// at T = 2-4; v10 up to 256: 283-500 µs against 387-548 at T = 100-256, git:NOTES.md "v10 run 18").
#ifndef ADALN_DW_SIMT_MAX
#define ADALN_DW_SIMT_MAX 1
#endif
#ifndef ADALN_DW_MMA_MAX
#if defined(ADALN_PATH_SM90)
#define ADALN_DW_MMA_MAX 12
#else
#define ADALN_DW_MMA_MAX 256
#endif
#endif
static_assert(ADALN_DW_MMA_MAX >= 0 && ADALN_DW_MMA_MAX <= 256, "ADALN_DW_MMA_MAX: 0 to 256");

#ifndef ADALN_REQUIRED_CC
#error "define ADALN_REQUIRED_CC (e.g. 90 for sm_90a, 100 for sm_100a)"
#endif
#ifndef ADALN_EXACT_CC
#define ADALN_EXACT_CC 1
#endif

namespace adaln {

// Fixed recipe constants: they depend on nothing at run time.
// Rows of T per d_act pass (caps the scratch at about 132 MB on either path; regrouping whole rows never
// changes a row's bits). The sm90 path keeps one fp32 plane per chunk group, the portable path one per chunk.
#ifndef ADALN_T_BLOCK
#if defined(ADALN_PATH_SM90)
#define ADALN_T_BLOCK 2048
#else
#define ADALN_T_BLOCK 512
#endif
#endif
constexpr int64_t kTBlock = ADALN_T_BLOCK;
constexpr int64_t kChunkTarget = 4096;  // d_act reduction chunk ~ this many of N
constexpr int64_t kKTile = 64;          // chunk lengths are multiples of this (except a final remainder)
constexpr int64_t kGroups = 6;          // at most this many chunk groups (see Chunking)
constexpr size_t kGemmWs = size_t(1) << 20;

void set_err(Err e, const char* fmt, ...) {
  if (!e.buf || e.len <= 0) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(e.buf, size_t(e.len), fmt, ap);
  va_end(ap);
}

// The d_temb reduction over N, fixed by N alone (never by T): chunks of kchunk (the last may be shorter),
// in groups of `per_group` consecutive chunks (the last group may hold fewer). For every row,
//   d_temb = ((0 + S_0) + S_1) + ...  times silu'(temb),   S_g = ((0 + P_first) + P_next) + ...  over group g,
// with P_j chunk j's fresh fp32 accumulation in k order. Six groups keep six fp32 planes on the sm90 path and
// give its GEMM 6 x 21 = 126 tiles (of the H200's 132 SMs) at T <= 128 with D = 2688.
struct Chunking {
  int64_t kchunk, nfull, rem, nchunks, per_group, ngroups;
};

// nchunks = ceil(N / 4096), chunk = ceil(N / nchunks) rounded up to 64; the last chunk may be shorter.
static Chunking chunking(int64_t N) {
  Chunking c;
  int64_t n = (N + kChunkTarget - 1) / kChunkTarget;
  int64_t k = (N + n - 1) / n;
  k = (k + kKTile - 1) / kKTile * kKTile;
  c.kchunk = k;
  c.nfull = N / k;
  c.rem = N - c.nfull * k;
  c.nchunks = c.nfull + (c.rem > 0 ? 1 : 0);
  c.per_group = (c.nchunks + kGroups - 1) / kGroups;
  c.ngroups = (c.nchunks + c.per_group - 1) / c.per_group;
  return c;
}

// fp32 planes of one T block's d_act pass: one per group where the GEMM sums the chunks, else one per chunk.
static int64_t dact_planes(const Chunking& c) { return kSumsInGemm ? c.ngroups : c.nchunks; }

// --- context and descriptor checks -----------------------------------------------------------------------

using CtxGetCurrent = CUresult (*)(CUcontext*);

static CtxGetCurrent ctx_get_current() {
  // Through the runtime's entry-point query, so the library needs no link against libcuda.
  static CtxGetCurrent fn = [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult q;
    if (cudaGetDriverEntryPointByVersion("cuCtxGetCurrent", &p, 12000, cudaEnableDefault, &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess)
      p = nullptr;
    return reinterpret_cast<CtxGetCurrent>(p);
  }();
  return fn;
}

bool context_is_current() {
  CtxGetCurrent get = ctx_get_current();
  CUcontext ctx = nullptr;
  return get != nullptr && get(&ctx) == CUDA_SUCCESS && ctx != nullptr;
}

struct DescriptorLog {
  int failures = 0;
  int first = 0;
};
static thread_local DescriptorLog descriptor_log;

void note_descriptor_failure(CUresult result) {
  if (descriptor_log.failures++ == 0) descriptor_log.first = int(result);
}
void reset_descriptor_failures() { descriptor_log = DescriptorLog{}; }
int descriptor_failures(int* first_result) {
  *first_result = descriptor_log.first;
  return descriptor_log.failures;
}

// Make `device`'s primary context current on this thread (cudaSetDevice does so from CUDA 12 on), check
// that it is, and refuse to start on top of an error left pending by earlier work.
static int enter_device(int device, Err err) {
  cudaError_t ce = cudaSetDevice(device);
  if (ce != cudaSuccess) {
    set_err(err, "cudaSetDevice(%d): %s", device, cudaGetErrorString(ce));
    return ADALN_DEVICE_QUERY;
  }
  if (!context_is_current()) {
    set_err(err, "no CUDA context is current on this thread after cudaSetDevice(%d)", device);
    return ADALN_NO_CONTEXT;
  }
  ce = cudaGetLastError();
  if (ce != cudaSuccess) {
    set_err(err, "a CUDA error was pending before this call (nothing launched): %s", cudaGetErrorString(ce));
    return ADALN_PENDING_ERROR;
  }
  return ADALN_OK;
}

static int device_info(int dev, int* sm_count, Err err) {
  static int cached[64] = {0};
  if (dev >= 0 && dev < 64 && cached[dev] > 0) {
    *sm_count = cached[dev];
    return ADALN_OK;
  }
  int major = 0, minor = 0, sms = 0;
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
  cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev);
  cudaError_t ce = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
  if (ce != cudaSuccess) {
    set_err(err, "cudaDeviceGetAttribute: %s", cudaGetErrorString(ce));
    return ADALN_DEVICE_QUERY;
  }
  int cc = major * 10 + minor;
  bool ok = ADALN_EXACT_CC ? (cc == ADALN_REQUIRED_CC) : (cc >= ADALN_REQUIRED_CC);
  if (!ok) {
    set_err(err, "this library (%s) was built for compute capability %s%d.%d; device %d is %d.%d", ADALN_PATH_NAME,
            ADALN_EXACT_CC ? "" : ">= ", ADALN_REQUIRED_CC / 10, ADALN_REQUIRED_CC % 10, dev, major, minor);
    return ADALN_WRONG_ARCH;
  }
  if (dev >= 0 && dev < 64) cached[dev] = sms;
  *sm_count = sms;
  return ADALN_OK;
}

// Every entry point that launches work starts here: the context, then the device's properties.
static int begin_call(int device, int* sm_count, Err err) {
  int rc = enter_device(device, err);
  return rc ? rc : device_info(device, sm_count, err);
}

static int check_launch(cudaError_t ce, Err err, const char* what) {  // ce: launch_kernel's result (pdl.cuh)
  if (ce != cudaSuccess) {
    set_err(err, "%s: %s", what, cudaGetErrorString(ce));
    return ADALN_LAUNCH;
  }
  return 0;
}

static bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

static int grid_for(int64_t n, int threads) {
  int64_t g = (n + threads - 1) / threads;
  if (g > 65535LL * 16) g = 65535LL * 16;
  return int(g);
}

// Which of our kernels let the next one be scheduled early (pdl.cuh release_next_kernel), as measured in v15's run
// 36 (git:NOTES.md): the dW kernels outside a GEMM always (the next step's silu follows), silu up to 64 rows (the
// forward there 1-2 µs faster) and the fold / db launch when dW runs outside a GEMM. Released early, the GEMMs
// above that ran 1-3 % slower (the forward from T = 300 on, the dW GEMM from T = 64 on; why is not known), while
// the small-T kernels released gained 2-3 µs a step at T = 3 and 4.
constexpr int64_t kSiluReleaseMaxT = 64;

// act = bf16(silu(x)), silu computed in fp32 as x / (1 + exp(-x)) (PyTorch's formula), rounded once.
__global__ void silu_to_bf16(const float4* __restrict__ x, __nv_bfloat162* __restrict__ y, int64_t n4, int release) {
  wait_for_previous_kernel();
  if (release) release_next_kernel();
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n4; i += int64_t(gridDim.x) * blockDim.x) {
    float4 v = x[i];
    float a = __fdiv_rn(v.x, __fadd_rn(1.0f, expf(-v.x)));
    float b = __fdiv_rn(v.y, __fadd_rn(1.0f, expf(-v.y)));
    float c = __fdiv_rn(v.z, __fadd_rn(1.0f, expf(-v.z)));
    float d = __fdiv_rn(v.w, __fadd_rn(1.0f, expf(-v.w)));
    y[2 * i] = __floats2bfloat162_rn(a, b);
    y[2 * i + 1] = __floats2bfloat162_rn(c, d);
  }
}

__device__ __forceinline__ float dsilu(float x) {
  float s = __frcp_rn(__fadd_rn(1.0f, expf(-x)));
  return __fmul_rn(s, __fadd_rn(1.0f, __fmul_rn(x, __fsub_rn(1.0f, s))));
}

// d_temb = (((0 + S_0) + S_1) + ...) * silu'(temb), S_g = ((0 + P_a) + P_a+1) + ... over the `per_group`
// planes of group g: plain fp32 adds in a fixed order (the Chunking comment). Called with per_group = 1 on
// planes that are already group sums (0 + S = S: a sum that starts from +0 is never -0). The planes are loaded
// kFoldBatch at a time before they are added (v9: with one load per add the fold's L2 round trips ran one after
// another), the adds the same ones in the same order.
constexpr int kFoldBatch = 8;

__device__ __forceinline__ void add4(float4& s, const float4& p) {
  s.x = __fadd_rn(s.x, p.x);
  s.y = __fadd_rn(s.y, p.y);
  s.z = __fadd_rn(s.z, p.z);
  s.w = __fadd_rn(s.w, p.w);
}

struct FoldArgs {
  const float4* P;
  int64_t nplanes, per_group, plane4;
  const float4* temb;
  float4* out;
  int64_t n4;
};

// Block `block` of `nblocks` (the fold's share of the grid), grid-stride over the n4 float4 elements.
__device__ __forceinline__ void fold_dtemb_body(const FoldArgs& a, int64_t block, int64_t nblocks) {
  const float4* __restrict__ P = a.P;
  const float4* __restrict__ temb = a.temb;
  const int64_t plane4 = a.plane4, n4 = a.n4;
  for (int64_t i = block * blockDim.x + threadIdx.x; i < n4; i += nblocks * blockDim.x) {
    const float4 x = temb[i];
    float4 total = make_float4(0.0f, 0.0f, 0.0f, 0.0f), s = total;
    const int np = int(a.nplanes), pg = int(a.per_group);  // at most a few dozen planes
    for (int c0 = 0; c0 < np; c0 += kFoldBatch) {
      float4 p[kFoldBatch];
#pragma unroll
      for (int u = 0; u < kFoldBatch; ++u)
        if (c0 + u < np) p[u] = P[(c0 + u) * plane4 + i];
#pragma unroll
      for (int u = 0; u < kFoldBatch; ++u) {
        const int c = c0 + u;
        if (c >= np) break;
        add4(s, p[u]);
        if ((c + 1) % pg == 0 || c + 1 == np) {  // group done: into the total, the next group from +0
          add4(total, s);
          s = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        }
      }
    }
    float4 r;
    r.x = __fmul_rn(total.x, dsilu(x.x));
    r.y = __fmul_rn(total.y, dsilu(x.y));
    r.z = __fmul_rn(total.z, dsilu(x.z));
    r.w = __fmul_rn(total.w, dsilu(x.w));
    a.out[i] = r;
  }
}

// db[n] = sum_t dY[t, n] in fp32, one rounding to bf16. A block owns 256 columns (8 per lane, 16-byte loads);
// its warp w sums the rows t = w, w + 8, w + 16, ... in ascending order, then warp 0 adds the 8 warp sums in
// warp order. The order depends on T only, so db is repeatable; 8 warps per column block keep enough loads in
// flight to stream dY near the copy rate (v2's kernel, one thread per 8 columns summing every row, ran at
// ~1.4 TB/s at T = 2048).
constexpr int kDbWarps = 8;
constexpr int kDbUnroll = 8;

__device__ __forceinline__ void add_bf16x8(float* s, uint4 v) {
  const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&v);
#pragma unroll
  for (int q = 0; q < 4; ++q) {
    float2 f = __bfloat1622float2(h[q]);
    s[2 * q] = __fadd_rn(s[2 * q], f.x);
    s[2 * q + 1] = __fadd_rn(s[2 * q + 1], f.y);
  }
}

struct DbArgs {
  const uint4* dY;
  uint4* db;
  int64_t T, N8;
};

__device__ __forceinline__ void colsum_db_body(const DbArgs& a, int64_t block) {
  __shared__ float warp_sum[kDbWarps][8][33];  // [warp][column of the lane's 8][lane] (+1: no bank conflicts)
  const uint4* __restrict__ dY = a.dY;
  const int64_t T = a.T, N8 = a.N8;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t j = block * 32LL + lane;
  float s[8];
#pragma unroll
  for (int q = 0; q < 8; ++q) s[q] = 0.0f;
  if (j < N8) {
    int64_t t = warp;
    for (; t + (kDbUnroll - 1) * kDbWarps < T; t += kDbUnroll * kDbWarps) {
      uint4 v[kDbUnroll];
#pragma unroll
      for (int u = 0; u < kDbUnroll; ++u) v[u] = dY[(t + u * kDbWarps) * N8 + j];
#pragma unroll
      for (int u = 0; u < kDbUnroll; ++u) add_bf16x8(s, v[u]);
    }
    for (; t < T; t += kDbWarps) add_bf16x8(s, dY[t * N8 + j]);
  }
#pragma unroll
  for (int q = 0; q < 8; ++q) warp_sum[warp][q][lane] = s[q];
  __syncthreads();
  if (warp != 0 || j >= N8) return;
#pragma unroll
  for (int q = 0; q < 8; ++q) {
    float r = warp_sum[0][q][lane];
#pragma unroll
    for (int w = 1; w < kDbWarps; ++w) r = __fadd_rn(r, warp_sum[w][q][lane]);
    s[q] = r;
  }
  uint4 o;
  __nv_bfloat162* oh = reinterpret_cast<__nv_bfloat162*>(&o);
#pragma unroll
  for (int q = 0; q < 4; ++q) oh[q] = __floats2bfloat162_rn(s[2 * q], s[2 * q + 1]);
  a.db[j] = o;
}

static int64_t db_blocks(int64_t N8) { return (N8 + 31) / 32; }

constexpr int kFoldThreads = 32 * kDbWarps;  // the fold and db kernels share a block size (the merged launch)

__global__ void __launch_bounds__(kFoldThreads) fold_dtemb(FoldArgs a) {
  wait_for_previous_kernel();
  fold_dtemb_body(a, blockIdx.x, gridDim.x);
}

__global__ void __launch_bounds__(kFoldThreads) colsum_db(DbArgs a, int release) {
  wait_for_previous_kernel();
  if (release) release_next_kernel();
  colsum_db_body(a, blockIdx.x);
}

// The last T block's fold and db in one launch (v12.1): db's blocks after the fold's, each block doing one of the
// two, so the two small kernels overlap and one launch boundary goes. The adds of each are unchanged.
__global__ void __launch_bounds__(kFoldThreads) fold_dtemb_and_db(FoldArgs f, int fold_blocks, DbArgs d,
                                                                    int release) {
  wait_for_previous_kernel();
  if (release) release_next_kernel();
  if (blockIdx.x < fold_blocks)
    fold_dtemb_body(f, blockIdx.x, fold_blocks);
  else
    colsum_db_body(d, blockIdx.x - fold_blocks);
}

#if ADALN_DW_SIMT_MAX > 0
constexpr int kDwSimtMaxThreads = 384;  // D <= 3072 (one thread per 8 columns); leaves 170 registers a thread
constexpr int kDwRows = 32;             // rows of dW per block step, their dY values staged in shared memory

// dW[n, 8c .. 8c+8) = sum_t dY[t, n] * act[t, 8c .. 8c+8) for T <= ADALN_DW_SIMT_MAX: fp32 fma in ascending t,
// one rounding to bf16; the order depends on T only (repeatable). Thread c holds act's columns 8c .. 8c+8 of
// every t in registers. Per step a block loads the dY values of kDwRows rows into shared memory (coalesced,
// one wait), then writes those rows, each one coalesced 2*D-byte store: no store waits on a load.
__global__ void __launch_bounds__(kDwSimtMaxThreads) dw_small_t(const __nv_bfloat16* __restrict__ dY,
                                                                const uint4* __restrict__ act,
                                                                uint4* __restrict__ dW, int T, int64_t N, int D8) {
  wait_for_previous_kernel();
  release_next_kernel();
  __shared__ float g[ADALN_DW_SIMT_MAX][kDwRows];
  const int c = threadIdx.x;
  uint4 a[ADALN_DW_SIMT_MAX];
#pragma unroll
  for (int t = 0; t < ADALN_DW_SIMT_MAX; ++t)
    if (t < T && c < D8) a[t] = act[int64_t(t) * D8 + c];
  for (int64_t n0 = int64_t(blockIdx.x) * kDwRows; n0 < N; n0 += int64_t(gridDim.x) * kDwRows) {
    __syncthreads();  // the previous step's g has been read
    for (int i = threadIdx.x; i < T * kDwRows; i += blockDim.x) {
      const int t = i / kDwRows, r = i % kDwRows;
      g[t][r] = n0 + r < N ? __bfloat162float(dY[int64_t(t) * N + n0 + r]) : 0.0f;
    }
    __syncthreads();
    if (c >= D8) continue;
    for (int r = 0; r < kDwRows && n0 + r < N; ++r) {
      float s[8];
#pragma unroll
      for (int q = 0; q < 8; ++q) s[q] = 0.0f;
#pragma unroll
      for (int t = 0; t < ADALN_DW_SIMT_MAX; ++t) {
        if (t < T) {
          const float gt = g[t][r];
          const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&a[t]);
#pragma unroll
          for (int q = 0; q < 4; ++q) {
            const float2 f = __bfloat1622float2(h[q]);
            s[2 * q] = __fmaf_rn(gt, f.x, s[2 * q]);
            s[2 * q + 1] = __fmaf_rn(gt, f.y, s[2 * q + 1]);
          }
        }
      }
      uint4 o;
      __nv_bfloat162* oh = reinterpret_cast<__nv_bfloat162*>(&o);
#pragma unroll
      for (int q = 0; q < 4; ++q) oh[q] = __floats2bfloat162_rn(s[2 * q], s[2 * q + 1]);
      dW[(n0 + r) * D8 + c] = o;
    }
  }
}
#endif

static int check_shapes(int64_t T, int64_t D, int64_t N, Err err) {
  if (T < 1) {
    set_err(err, "T must be >= 1 (got %lld)", (long long)T);
    return ADALN_BAD_ARGUMENT;
  }
  if (D < 8 || N < 8 || D % 8 != 0 || N % 8 != 0) {
    set_err(err, "D and N must be positive multiples of 8 (got D=%lld, N=%lld)", (long long)D, (long long)N);
    return ADALN_BAD_ARGUMENT;
  }
  if (T > (int64_t(1) << 30) || D > (int64_t(1) << 30) || N > (int64_t(1) << 30)) {
    set_err(err, "sizes too large for this kernel");
    return ADALN_BAD_ARGUMENT;
  }
  return ADALN_OK;
}

// --- the three backward steps (each enqueues on `stream`, with `sms` SMs for its persistent GEMMs) -------

// d_temb: per T block, the d_act GEMM(s) into the fp32 planes after the GEMM workspace at `ws`, then the fold;
// db (when not null) in the last T block's fold launch.
static int run_dtemb(const __nv_bfloat16* dy, const __nv_bfloat16* w, const float* temb, float* dtemb, void* db,
                     int64_t T, int64_t D, int64_t N, char* ws, int sms, bool release, cudaStream_t stream, Err err) {
  int rc = 0;
  Chunking c = chunking(N);
  float* P = reinterpret_cast<float*>(ws + kGemmWs);
  for (int64_t t0 = 0; t0 < T; t0 += kTBlock) {
    int64_t tb = (T - t0) < kTBlock ? (T - t0) : kTBlock;
    int64_t plane = tb * D;
    const __nv_bfloat16* dyb = dy + t0 * N;
    if (kSumsInGemm) {  // one launch for the whole groups, one for a shorter last group
      const int64_t glen = c.per_group * c.kchunk, gfull = N / glen, grest = N - gfull * glen;
      if (gfull > 0 &&
          (rc = gemm_dact(w, dyb, P, tb, D, N, gfull, glen, c.kchunk, plane, sms, ws, kGemmWs, stream, err)))
        return rc;
      if (grest > 0 && (rc = gemm_dact(w + gfull * glen * D, dyb + gfull * glen, P + gfull * plane, tb, D, N, 1, grest,
                                       c.kchunk, plane, sms, ws, kGemmWs, stream, err)))
        return rc;
    } else {  // one launch for the whole chunks, one for a shorter last chunk
      if (c.nfull > 0 && (rc = gemm_dact(w, dyb, P, tb, D, N, c.nfull, c.kchunk, c.kchunk, plane, sms, ws, kGemmWs,
                                         stream, err)))
        return rc;
      const int64_t n0 = c.nfull * c.kchunk;
      if (c.rem > 0 && (rc = gemm_dact(w + n0 * D, dyb + n0, P + c.nfull * plane, tb, D, N, 1, c.rem, c.kchunk, plane,
                                       sms, ws, kGemmWs, stream, err)))
        return rc;
    }
    const int64_t n4 = plane / 4;
    const FoldArgs f{reinterpret_cast<const float4*>(P), dact_planes(c), kSumsInGemm ? 1 : c.per_group, n4,
                     reinterpret_cast<const float4*>(temb + t0 * D), reinterpret_cast<float4*>(dtemb + t0 * D), n4};
    const int fold_blocks = grid_for(n4, kFoldThreads);
    if (db && t0 + tb >= T) {
      const DbArgs d{reinterpret_cast<const uint4*>(dy), reinterpret_cast<uint4*>(db), T, N / 8};
      cudaError_t ce = launch_kernel(fold_dtemb_and_db, dim3(unsigned(fold_blocks + db_blocks(N / 8))),
                                     dim3(kFoldThreads), 0, stream, f, fold_blocks, d, int(release));
      if ((rc = check_launch(ce, err, "d_temb fold and db kernel"))) return rc;
    } else {
      cudaError_t ce = launch_kernel(fold_dtemb, dim3(unsigned(fold_blocks)), dim3(kFoldThreads), 0, stream, f);
      if ((rc = check_launch(ce, err, "d_temb fold kernel"))) return rc;
    }
  }
  return ADALN_OK;
}

// dW: on CUDA cores for T <= ADALN_DW_SIMT_MAX, on tensor cores outside a GEMM (mma.sync) up to ADALN_DW_MMA_MAX,
// else the dW GEMM (its workspace: `ws`, kGemmWs bytes).
static bool dw_on_cuda_cores(int64_t T, int64_t D) {
#if ADALN_DW_SIMT_MAX > 0
  return T <= ADALN_DW_SIMT_MAX && D / 8 <= kDwSimtMaxThreads;
#else
  (void)T, (void)D;
  return false;
#endif
}
static bool dw_on_mma(int64_t T, int64_t D, int64_t N) { return T <= ADALN_DW_MMA_MAX && dw_mma_fits(T, D, N); }
static bool dw_outside_gemm(int64_t T, int64_t D, int64_t N) { return dw_on_cuda_cores(T, D) || dw_on_mma(T, D, N); }

static int run_dw(const __nv_bfloat16* dy, const void* act, void* dW, int64_t T, int64_t D, int64_t N, void* ws,
                  int sms, cudaStream_t stream, Err err) {
#if ADALN_DW_SIMT_MAX > 0
  if (dw_on_cuda_cores(T, D)) {
    const int d8 = int(D / 8), threads = (d8 + 31) / 32 * 32;
    int per_sm = 1;  // as many blocks as fit at once (registers limit it), each walking its share of rows
    cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, dw_small_t, threads, 0);
    const int64_t steps = (N + kDwRows - 1) / kDwRows, resident = int64_t(sms) * (per_sm > 0 ? per_sm : 1);
    cudaError_t ce = launch_kernel(dw_small_t, dim3(unsigned(steps < resident ? steps : resident)),
                                   dim3(unsigned(threads)), 0, stream, dy, reinterpret_cast<const uint4*>(act),
                                   reinterpret_cast<uint4*>(dW), int(T), N, d8);
    return check_launch(ce, err, "dW kernel (CUDA cores)");
  }
#endif
  if (dw_on_mma(T, D, N)) return dw_mma(dy, act, dW, T, D, N, sms, stream, err);
  return gemm_dw(dy, act, dW, T, D, N, sms, ws, kGemmWs, stream, err);
}

static int run_db(const void* dY, void* db, int64_t T, int64_t N, bool release, cudaStream_t stream, Err err) {
  const DbArgs d{reinterpret_cast<const uint4*>(dY), reinterpret_cast<uint4*>(db), T, N / 8};
  cudaError_t ce =
      launch_kernel(colsum_db, dim3(unsigned(db_blocks(N / 8))), dim3(kFoldThreads), 0, stream, d, int(release));
  return check_launch(ce, err, "db kernel");
}

}  // namespace adaln

using namespace adaln;

#define ADALN_API __attribute__((visibility("default")))

extern "C" {

ADALN_API int adaln_abi_version(void) { return 3; }
ADALN_API const char* adaln_status_name(int status) { return adaln_status_text(status); }
ADALN_API const char* adaln_path(void) { return ADALN_PATH_NAME; }
ADALN_API const char* adaln_config(void) {
  return ADALN_CONFIG "; dW mma.sync outside a GEMM for T<=" ADALN_STR(ADALN_DW_MMA_MAX);
}
ADALN_API int adaln_required_cc(void) { return ADALN_REQUIRED_CC; }

ADALN_API void adaln_chunking(int64_t N, int64_t* kchunk, int64_t* nchunks, int64_t* per_group, int64_t* t_block) {
  Chunking c = chunking(N);
  *kchunk = c.kchunk;
  *nchunks = c.nchunks;
  *per_group = c.per_group;
  *t_block = kTBlock;
}

ADALN_API size_t adaln_gemm_workspace_bytes(void) { return kGemmWs; }

// Scratch for a backward with d_temb: a GEMM workspace + the fp32 planes of one T block (capped at kTBlock rows).
ADALN_API size_t adaln_dtemb_scratch_bytes(int64_t T, int64_t D, int64_t N) {
  Chunking c = chunking(N);
  int64_t tb = T < kTBlock ? T : kTBlock;
  return size_t(dact_planes(c)) * size_t(tb) * size_t(D) * sizeof(float) + kGemmWs;
}

ADALN_API int adaln_forward(const float* temb, const void* W, const void* b, void* act, void* Y, int64_t T, int64_t D,
                            int64_t N, void* ws, size_t ws_bytes, int device, void* stream_, char* errbuf, int errlen) {
  Err err{errbuf, errlen};
  int rc = check_shapes(T, D, N, err);
  if (rc) return rc;
  if (!aligned16(temb) || !aligned16(W) || !aligned16(b) || !aligned16(act) || !aligned16(Y) || !aligned16(ws)) {
    set_err(err, "adaln_forward: every pointer must be 16-byte aligned");
    return ADALN_BAD_ARGUMENT;
  }
  int sms = 0;
  if ((rc = begin_call(device, &sms, err))) return rc;
  cudaStream_t stream = reinterpret_cast<cudaStream_t>(stream_);
  int64_t n4 = T * D / 4;
  cudaError_t ce = launch_kernel(silu_to_bf16, dim3(unsigned(grid_for(n4, 256))), dim3(256), 0, stream,
                                 reinterpret_cast<const float4*>(temb), reinterpret_cast<__nv_bfloat162*>(act), n4,
                                 int(T <= kSiluReleaseMaxT));
  if ((rc = check_launch(ce, err, "silu kernel"))) return rc;
  return gemm_fwd(W, act, b, Y, T, D, N, sms, ws, ws_bytes, stream, err);
}

// Any of dtemb, dW, db may be null (not needed). act is needed for dW only; temb, scratch for dtemb only.
// Scratch for d_temb: a GEMM workspace and the fp32 planes (adaln_dtemb_scratch_bytes); for dW alone, a GEMM
// workspace (adaln_gemm_workspace_bytes).
ADALN_API int adaln_backward(const void* dY, const void* W, const float* temb, const void* act, float* dtemb, void* dW,
                             void* db, int64_t T, int64_t D, int64_t N, void* scratch, size_t scratch_bytes, int device,
                             void* stream_, char* errbuf, int errlen) {
  Err err{errbuf, errlen};
  int rc = check_shapes(T, D, N, err);
  if (rc) return rc;
  if (!aligned16(dY) || !aligned16(W) || (temb && !aligned16(temb)) || (act && !aligned16(act)) ||
      (dtemb && !aligned16(dtemb)) || (dW && !aligned16(dW)) || (db && !aligned16(db)) || !aligned16(scratch)) {
    set_err(err, "adaln_backward: every pointer must be 16-byte aligned");
    return ADALN_BAD_ARGUMENT;
  }
  if (dtemb && !temb) {
    set_err(err, "adaln_backward: d_temb needs temb");
    return ADALN_BAD_ARGUMENT;
  }
  if (dW && !act) {
    set_err(err, "adaln_backward: dW needs act");
    return ADALN_BAD_ARGUMENT;
  }
  const size_t need = dtemb ? adaln_dtemb_scratch_bytes(T, D, N) : (dW ? kGemmWs : 0);
  if (scratch_bytes < need) {
    set_err(err, "adaln_backward: scratch of %zu bytes < %zu needed", scratch_bytes, need);
    return ADALN_BAD_ARGUMENT;
  }
  int sms = 0;
  if ((rc = begin_call(device, &sms, err))) return rc;
  cudaStream_t stream = reinterpret_cast<cudaStream_t>(stream_);
  const __nv_bfloat16* dy = reinterpret_cast<const __nv_bfloat16*>(dY);
  const __nv_bfloat16* w = reinterpret_cast<const __nv_bfloat16*>(W);
  char* ws = reinterpret_cast<char*>(scratch);  // d_temb's GEMM workspace first, then its planes
  // db before dW (v12): right after d_act, dY is still in L2, and after dW's 520 MB write db would wait on the
  // write-back of the dirty lines dW leaves in L2 (git:NOTES.md "v12 run 26": 6.4 µs there against 3.3 alone).
  // With d_temb, db shares the fold's launch (v12.1).
  const bool release = dW && dw_outside_gemm(T, D, N);  // which kernels release the next early: see kSiluReleaseMaxT
  if (dtemb && (rc = run_dtemb(dy, w, temb, dtemb, db, T, D, N, ws, sms, release, stream, err))) return rc;
  if (db && !dtemb && (rc = run_db(dY, db, T, N, release, stream, err))) return rc;
  if (dW) return run_dw(dy, act, dW, T, D, N, ws, sms, stream, err);
  return ADALN_OK;
}

}  // extern "C"
