// dW = dY^T . act for small T (K = T <= 64) on wgmma (sm_90a only), written as a row-ordered store stream.
// The sm90 path's answer to what dw_mma.cu (mma.sync) showed (NOTES.md, v8 runs 9-13): at small T dW is a
// 520 MB write, fast only when the lines being written form a narrow band of whole rows; dw_mma.cu keeps that
// order but its math, issued by the storing warps themselves between two block barriers, is only partly hidden
// behind the stores (T = 64: 161-175 µs against 126 at T = 2). Here the math is asynchronous: each warpgroup
// issues the wgmma of its next 64-column chunk before it converts and stores the previous one (two accumulator
// sets), so the tensor cores work while the warps store.
//
// Layout: G column groups of P blocks (G·P = the SMs); a block owns D / G adjacent columns for the whole kernel
// and keeps their act values in shared memory as wgmma's B operand (K-major, 128-byte swizzle, T padded to 64
// with zeros), loaded once. Block k of each group walks the 64-row steps k, k + P, ...; per step the block
// copies dY[0:T, rows] into a ring stage (cp.async, one barrier per step), each warp forms its 16 rows' A
// fragments with ldmatrix.trans (warp w of a warpgroup: rows 16w .. 16w + 15 of the step), and each of the two
// warpgroups runs its half of the block's chunks: KT wgmma m64n64k16 per chunk, then the bf16 result through the
// warp's own stage out as 128-byte lines (dw_mma.cu's epilogue). Each sum runs over k in order, one k16 step
// after another; the order depends on T only (dW is compared with itself).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include <cute/arch/mma_sm90_desc.hpp>
#include <cute/arch/mma_sm90_gmma.hpp>

#include "gemms.h"
#include "status.h"

namespace adaln {
namespace {

#ifndef ADALN_DWWG_STAGES
#define ADALN_DWWG_STAGES 4
#endif
constexpr int kStages = ADALN_DWWG_STAGES;  // ring of dY steps, a power of two
static_assert(kStages >= 2 && (kStages & (kStages - 1)) == 0, "ADALN_DWWG_STAGES: 2, 4, 8...");
constexpr int kWarpgroups = 2;
constexpr int kThreads = 128 * kWarpgroups;
constexpr int kRows = 64;             // rows of dW per step (wgmma's M)
constexpr int kCols = 64;             // columns per chunk (wgmma's N; one 128-byte line per row)
constexpr int kChunkBytes = kCols * 128;  // a chunk's act: 64 columns x 64 k (bf16), K-major
constexpr int kStageRow = 144;        // bytes per t row of staged dY (128 + 16: ldmatrix rows on distinct banks)
constexpr int kInStage = 64 * kStageRow;  // 64 t rows (T padded to 16 KT <= 64)
constexpr int kOutStage = 16 * 128;   // a warp's 16 x 64 bf16 result
// The act slice a block may keep (KB): the fewest column groups whose slice fits (160: 3 groups for D = 2688).
#ifndef ADALN_DWWG_ACT_KB
#define ADALN_DWWG_ACT_KB 160
#endif
constexpr int kMaxActBytes = ADALN_DWWG_ACT_KB * 1024;
constexpr int kActBatch = 14;
__host__ __device__ constexpr int smem_bytes(int chunks) {
  return 1024 + chunks * kChunkBytes + kStages * kInStage + (kThreads / 32) * kOutStage;  // +1024: alignment
}

using Wgmma = cute::SM90::GMMA::MMA_64x64x16_F32BF16BF16_RS<cute::SM90::GMMA::Major::K, cute::SM90::GMMA::Major::K>;

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void ldsm_x4_trans(uint32_t addr, uint32_t (&r)[4]) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

__device__ __forceinline__ void cp_async16(uint32_t dst, const void* src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

__device__ __forceinline__ uint32_t pack_bf16x2(float lo, float hi) {
  __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<uint32_t*>(&h);
}

// Shared-memory matrix descriptor of a K-major, 128-byte-swizzled operand: rows of 128 bytes (64 k), groups of
// 8 rows 1024 bytes apart (SBO), the leading offset unused by swizzled K-major layouts (1).
__device__ __forceinline__ uint64_t kmajor_sw128_desc(uint32_t addr) {
  return uint64_t((addr >> 4) & 0x3FFF) | (uint64_t(1) << 16) | (uint64_t(1024 >> 4) << 32) | (uint64_t(1) << 62);
}

// dY[0:T, n0:n0+64) into a stage (t rows of 128 bytes, kStageRow apart); rows of dW past N read as zeros.
__device__ __forceinline__ void copy_dy(const __nv_bfloat16* __restrict__ dY, int T, int N, int n0, uint32_t stage) {
  for (int i = threadIdx.x; i < 8 * T; i += kThreads) {
    const int t = i >> 3, n = n0 + (i & 7) * 8;
    const bool in = n < N;
    cp_async16(stage + t * kStageRow + (i & 7) * 16, in ? dY + size_t(t) * N + n : dY, in ? 16 : 0);
  }
}

__device__ __forceinline__ void fence_acc(float (&d)[32]) {
#pragma unroll
  for (int i = 0; i < 32; ++i) cute::warpgroup_fence_operand(d[i]);
}

// One chunk's KT k-steps into d (the first overwrites it), committed as one wgmma group.
template <int KT>
__device__ __forceinline__ void issue_chunk(float (&d)[32], const uint32_t (&a)[KT][4], uint64_t desc) {
  fence_acc(d);
  cute::warpgroup_arrive();
#pragma unroll
  for (int ks = 0; ks < KT; ++ks)
    Wgmma::fma(a[ks][0], a[ks][1], a[ks][2], a[ks][3], desc + uint64_t(2 * ks),  // +32 bytes: the next 16 k
               d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7], d[8], d[9], d[10], d[11], d[12], d[13], d[14], d[15],
               d[16], d[17], d[18], d[19], d[20], d[21], d[22], d[23], d[24], d[25], d[26], d[27], d[28], d[29],
               d[30], d[31], ks == 0 ? cute::SM90::GMMA::ScaleOut::Zero : cute::SM90::GMMA::ScaleOut::One);
  cute::warpgroup_commit_batch();
  fence_acc(d);
}

// The warp's 16 x 64 piece of a finished chunk: bf16 pairs into its stage as 16 rows of 128 bytes (piece j of
// row r at j ^ (r & 7)), then out as whole 16-byte pieces, each store instruction four 128-byte lines.
__device__ __forceinline__ void store_chunk(const float (&d)[32], unsigned char* out_stage, __nv_bfloat16* dW,
                                            int64_t D, int N, int row0, int col0) {
  const int lane = threadIdx.x & 31, g = lane >> 2, q = lane & 3;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int r = h * 8 + g;
#pragma unroll
    for (int j = 0; j < 8; ++j)
      *reinterpret_cast<uint32_t*>(out_stage + r * 128 + ((j ^ (r & 7)) * 16) + q * 4) =
          pack_bf16x2(d[4 * j + 2 * h], d[4 * j + 2 * h + 1]);
  }
  __syncwarp();
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const int idx = k * 32 + lane, r = idx >> 3, p = idx & 7;
    const uint4 v = *reinterpret_cast<const uint4*>(out_stage + r * 128 + ((p ^ (r & 7)) * 16));
    if (row0 + r < N) *reinterpret_cast<uint4*>(dW + size_t(row0 + r) * D + col0 + p * 8) = v;
  }
  __syncwarp();  // every lane has read the stage before the next chunk overwrites it
}

// KT = ceil(T / 16), CW = chunks per warpgroup. Grid: `groups` column groups of P blocks; a block's columns:
// 2 CW chunks of 64.
template <int KT, int CW>
__global__ void __launch_bounds__(kThreads, 1)
    dw_wgmma_kernel(const __nv_bfloat16* __restrict__ dY, const __nv_bfloat16* __restrict__ act,
                    __nv_bfloat16* __restrict__ dW, int T, int N, int D, int groups) {
  constexpr int chunks = kWarpgroups * CW;
  extern __shared__ unsigned char smem_raw[];
  // The act slice starts on a 1024-byte boundary (the 128-byte swizzle's atom), then the ring, then the stages.
  const uint32_t raw_u32 = smem_u32(smem_raw);
  unsigned char* act_s = smem_raw + ((1024 - (raw_u32 & 1023)) & 1023);
  unsigned char* in_stages = act_s + chunks * kChunkBytes;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, wg = warp >> 2, wq = warp & 3;
  unsigned char* out_stage = in_stages + kStages * kInStage + warp * kOutStage;
  const uint32_t act_u32 = smem_u32(act_s), in_u32 = smem_u32(in_stages);
  const int per_group = gridDim.x / groups, group = blockIdx.x / per_group, block = blockIdx.x % per_group;
  const int cols = chunks * kCols, col_base = group * cols;

  const int steps = (N + kRows - 1) / kRows;
  const int count = block < steps ? (steps - 1 - block) / per_group + 1 : 0;
  const int chunk0 = wg * CW;
  const int mat = lane >> 3, mrow = lane & 7;
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < count) copy_dy(dY, T, N, (block + s * per_group) * kRows, in_u32 + s * kInStage);
    cp_async_commit();
  }
  // act[t, col_base + n] -> byte (n / 8) * 1024 + (n % 8) * 128 + ((t / 8) ^ (n % 8)) * 16 + (t % 8) * 2, zeros
  // for t >= T. Lane = t: 16 bytes of one act row per lane, the 2-byte stores on distinct banks. kActBatch loads
  // in flight per thread (the slice is read once, at the start, where its latency is not hidden).
  for (int i0 = threadIdx.x; i0 < 64 * (cols / 8); i0 += kThreads * kActBatch) {
    uint4 v[kActBatch];
#pragma unroll
    for (int u = 0; u < kActBatch; ++u) {
      const int i = i0 + u * kThreads, t = i & 63;
      v[u] = make_uint4(0u, 0u, 0u, 0u);
      if (i < 64 * (cols / 8) && t < T)
        v[u] = *reinterpret_cast<const uint4*>(act + size_t(t) * D + col_base + (i >> 6) * 8);
    }
#pragma unroll
    for (int u = 0; u < kActBatch; ++u) {
      const int i = i0 + u * kThreads, t = i & 63, n8 = i >> 6;
      if (i >= 64 * (cols / 8)) break;
      const __nv_bfloat16* e = reinterpret_cast<const __nv_bfloat16*>(&v[u]);
#pragma unroll
      for (int k = 0; k < 8; ++k) {
        const int n = n8 * 8 + k;
        *reinterpret_cast<__nv_bfloat16*>(act_s + (n >> 3) * 1024 + (n & 7) * 128 + (((t >> 3) ^ (n & 7)) * 16) +
                                          (t & 7) * 2) = e[k];
      }
    }
  }
  // Rows T .. 16 KT of every ring stage stay zero (the copies write rows < T only).
  for (int i = threadIdx.x; i < kStages * (16 * KT - T) * 8; i += kThreads) {
    const int stage = i / ((16 * KT - T) * 8), r = i % ((16 * KT - T) * 8);
    *reinterpret_cast<uint4*>(in_stages + stage * kInStage + (T + r / 8) * kStageRow + (r & 7) * 16) =
        make_uint4(0u, 0u, 0u, 0u);
  }
  // The act slice is read by the tensor cores through the async proxy: make the generic writes visible to it.
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");

  float acc[2][32];
#pragma unroll
  for (int i = 0; i < 32; ++i) acc[0][i] = acc[1][i] = 0.0f;
  for (int i = 0; i < count; ++i) {
    const int row_step = (block + i * per_group) * kRows;
    cp_async_wait<kStages - 2>();
    __syncthreads();  // step i's copies have landed; every warp is done with step i - 1 (and the act slice)
    {
      const int ahead = i + kStages - 1;
      if (ahead < count) copy_dy(dY, T, N, (block + ahead * per_group) * kRows, in_u32 + (ahead % kStages) * kInStage);
      cp_async_commit();
    }
    const uint32_t stage_u32 = in_u32 + (i % kStages) * kInStage;
    // A fragments of the warp's 16 rows (m = n - row_step, k = t) for every k-step.
    uint32_t a[KT][4];
#pragma unroll
    for (int ks = 0; ks < KT; ++ks)
      ldsm_x4_trans(stage_u32 + (ks * 16 + (mat >> 1) * 8 + mrow) * kStageRow + (wq * 16 + (mat & 1) * 8) * 2, a[ks]);
    const int row0 = row_step + wq * 16;
    // Chunk c accumulates in acc[c % 2]; chunk c + 1's wgmma is issued before chunk c is stored, so the tensor
    // cores work while the warps store. CW is a compile-time count: every wait covers a known group.
    issue_chunk<KT>(acc[0], a, kmajor_sw128_desc(act_u32 + chunk0 * kChunkBytes));
#pragma unroll
    for (int c = 0; c < CW; ++c) {
      if (c + 1 < CW) {
        issue_chunk<KT>(acc[(c + 1) & 1], a, kmajor_sw128_desc(act_u32 + (chunk0 + c + 1) * kChunkBytes));
        cute::warpgroup_wait<1>();
      } else {
        cute::warpgroup_wait<0>();
      }
      fence_acc(acc[c & 1]);
      store_chunk(acc[c & 1], out_stage, dW, D, N, row0, col_base + (chunk0 + c) * kCols);
    }
  }
}

// Column groups: the fewest whose slice (2 CW chunks of 64 columns, CW <= kMaxChunksPerWg) fits kMaxActBytes;
// 0 when none (or T, D, N are out of range).
constexpr int kMaxChunksPerWg = kMaxActBytes / kChunkBytes / kWarpgroups;
int column_groups(int64_t T, int64_t D, int64_t N) {
  if (T < 1 || T > 64 || D % kCols != 0 || N % 8 != 0 || N >= (int64_t(1) << 31)) return 0;
  const int64_t chunks = D / kCols;
  for (int64_t g = 1; g <= chunks; ++g)
    if (chunks % (kWarpgroups * g) == 0 && chunks / g / kWarpgroups <= kMaxChunksPerWg) return int(g);
  return 0;
}

template <int KT, int CW>
int launch(const void* dY, const void* act, void* dW, int T, int N, int D, int groups, int sms, cudaStream_t stream,
           Err err) {
  const size_t bytes = size_t(smem_bytes(kWarpgroups * CW));
  cudaError_t ce =
      cudaFuncSetAttribute(dw_wgmma_kernel<KT, CW>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes));
  if (ce != cudaSuccess) {
    set_err(err, "dW kernel (wgmma): %zu bytes of shared memory: %s", bytes, cudaGetErrorString(ce));
    return ADALN_LAUNCH;
  }
  const int per_group = sms / groups > 0 ? sms / groups : 1;
  dw_wgmma_kernel<KT, CW><<<per_group * groups, kThreads, bytes, stream>>>(
      static_cast<const __nv_bfloat16*>(dY), static_cast<const __nv_bfloat16*>(act),
      static_cast<__nv_bfloat16*>(dW), T, N, D, groups);
  ce = cudaGetLastError();
  if (ce != cudaSuccess) {
    set_err(err, "dW kernel (wgmma) launch: %s", cudaGetErrorString(ce));
    return ADALN_LAUNCH;
  }
  return ADALN_OK;
}

template <int KT>
int launch_kt(const void* dY, const void* act, void* dW, int T, int N, int D, int groups, int sms, cudaStream_t stream,
              Err err) {
  static_assert(kMaxChunksPerWg >= 1 && kMaxChunksPerWg <= 10, "the switch below covers CW = 1 .. 10");
  switch (D / kCols / groups / kWarpgroups) {
    case 1: return launch<KT, 1>(dY, act, dW, T, N, D, groups, sms, stream, err);
    case 2: return launch<KT, 2>(dY, act, dW, T, N, D, groups, sms, stream, err);
    case 3: return launch<KT, 3>(dY, act, dW, T, N, D, groups, sms, stream, err);
    case 4: return launch<KT, 4>(dY, act, dW, T, N, D, groups, sms, stream, err);
    case 5: return launch<KT, 5>(dY, act, dW, T, N, D, groups, sms, stream, err);
    case 6: return launch<KT, 6>(dY, act, dW, T, N, D, groups, sms, stream, err);
    case 7: return launch<KT, 7>(dY, act, dW, T, N, D, groups, sms, stream, err);
    case 8: return launch<KT, 8>(dY, act, dW, T, N, D, groups, sms, stream, err);
    case 9: return launch<KT, 9>(dY, act, dW, T, N, D, groups, sms, stream, err);
    default: return launch<KT, 10>(dY, act, dW, T, N, D, groups, sms, stream, err);
  }
}

}  // namespace

bool dw_wgmma_fits(int64_t T, int64_t D, int64_t N) { return column_groups(T, D, N) > 0; }

int dw_wgmma(const void* dY, const void* act, void* dW, int64_t T, int64_t D, int64_t N, int sm_count,
             cudaStream_t stream, Err err) {
  const int groups = column_groups(T, D, N);
  if (groups == 0) {
    set_err(err, "dW kernel (wgmma) does not take T=%lld, D=%lld, N=%lld", (long long)T, (long long)D, (long long)N);
    return ADALN_BAD_ARGUMENT;
  }
  switch ((T + 15) / 16) {
    case 1: return launch_kt<1>(dY, act, dW, int(T), int(N), int(D), groups, sm_count, stream, err);
    case 2: return launch_kt<2>(dY, act, dW, int(T), int(N), int(D), groups, sm_count, stream, err);
    case 3: return launch_kt<3>(dY, act, dW, int(T), int(N), int(D), groups, sm_count, stream, err);
    default: return launch_kt<4>(dY, act, dW, int(T), int(N), int(D), groups, sm_count, stream, err);
  }
}

}  // namespace adaln
