// dW = dY^T . act for small T (K = T <= 64) on tensor cores (mma.sync m16n8k16, sm80 and later: both code
// paths), written as a store stream. At small T dW is a 520 MB write with little arithmetic; the GEMMs' tile
// epilogues write it at 3.4-3.9 TB/s (NOTES.md, "Store microbenchmark"). Here one block per SM keeps its
// group's columns of act in shared memory for the whole kernel (loaded once), and each warp walks its own
// contiguous share of 32-row x 64-column items with no block barrier: the dY values of its 32 rows (A
// fragments, reloaded when the rows change), the mma work, then the bf16 result through the warp's own
// shared-memory stage as whole 128-byte lines. The order depends on T only (dW is compared with itself).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "gemms.h"
#include "status.h"

namespace adaln {
namespace {

constexpr int kWarps = 12;                  // warps per block, one block per SM
constexpr int kRows = 32;                   // rows of dW per item (two m16 tiles)
constexpr int kCols = 64;                   // columns per item (eight n8 tiles: one 128-byte line per row)
constexpr int kStageRow = 80;               // bytes per t row of the staged dY (64 + 16: ldmatrix rows on distinct banks)
constexpr int kWarpStage = 64 * kStageRow;  // the staged dY (<= 64 t rows) or the 32 x 128-byte output tile
constexpr int kActSmemMax = 128 * 1024;     // act columns kept per block (the rest of shared memory: the stages)

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// Four 8x8 bf16 matrices, each transposed on the way in (thread i gives the address of row i % 8 of matrix i / 8).
__device__ __forceinline__ void ldsm_x4_trans(uint32_t addr, uint32_t (&r)[4]) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

__device__ __forceinline__ void mma_16816(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ uint32_t pack_bf16x2(float lo, float hi) {
  __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<uint32_t*>(&h);
}

// KT = ceil(T / 16) k-steps; rows t >= T of both operands are zeros. Grid: `groups` column groups of
// gridDim.x / groups blocks each; group g owns dW columns [g * cpg * 64, (g + 1) * cpg * 64).
template <int KT>
__global__ void __launch_bounds__(kWarps * 32, 1)
    dw_mma_kernel(const __nv_bfloat16* __restrict__ dY, const __nv_bfloat16* __restrict__ act,
                  __nv_bfloat16* __restrict__ dW, int T, int N, int D, int groups, int cpg) {
  extern __shared__ __align__(128) unsigned char smem[];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int per_group = gridDim.x / groups, group = blockIdx.x / per_group, block = blockIdx.x % per_group;
  const int pieces = cpg * 8;  // 16-byte pieces per act row of the group
  const int col0 = group * cpg * kCols;
  uint4* act_s = reinterpret_cast<uint4*>(smem);
  unsigned char* stage = smem + size_t(16 * KT) * pieces * 16 + size_t(warp) * kWarpStage;
  const uint32_t act_u32 = smem_u32(act_s), stage_u32 = smem_u32(stage);

  // The group's act columns, t < 16 * KT, each 16-byte piece p of row t stored at p ^ (t & 7) (within its
  // 128-byte line): the eight rows one ldmatrix reads fall on distinct banks.
  for (int i = threadIdx.x; i < 16 * KT * pieces; i += blockDim.x) {
    const int t = i / pieces, p = i % pieces;
    uint4 v = make_uint4(0u, 0u, 0u, 0u);
    if (t < T) v = *reinterpret_cast<const uint4*>(act + size_t(t) * D + col0 + p * 8);
    act_s[t * pieces + (p ^ (t & 7))] = v;
  }
  __syncthreads();

  // This warp's items, a contiguous share (the warps differ by at most one item); item = row block * cpg + chunk.
  const long long items = (long long)((N + kRows - 1) / kRows) * cpg;
  const long long warps = (long long)per_group * kWarps, share = (items + warps - 1) / warps;
  const long long first = ((long long)block * kWarps + warp) * share;
  const long long last = first + share < items ? first + share : items;
  const int mat = lane >> 3, mrow = lane & 7;  // the ldmatrix row this lane addresses
  const int g = lane >> 2, q = lane & 3;       // the accumulator fragment's row and column pair
  uint32_t a[2][KT][4];
  int rows_loaded = -1;
  for (long long it = first; it < last; ++it) {
    const int rb = int(it / cpg), chunk = int(it % cpg), n0 = rb * kRows;
    __syncwarp();  // every lane is done with the stage (the previous item's output)
    if (rb != rows_loaded) {
      rows_loaded = rb;
      // dY[t, n0 .. n0 + 32) as t rows of the stage; zeros past T and past N (N % 8 == 0)
      for (int j = lane; j < 16 * KT * 4; j += 32) {
        const int t = j >> 2, p = j & 3;
        uint4 v = make_uint4(0u, 0u, 0u, 0u);
        if (t < T && n0 + p * 8 < N) v = *reinterpret_cast<const uint4*>(dY + size_t(t) * N + n0 + p * 8);
        *reinterpret_cast<uint4*>(stage + t * kStageRow + p * 16) = v;
      }
      __syncwarp();
      // A fragment of m16 tile mi, k-step ks: matrices (t 0-7, n 0-7), (t 0-7, n 8-15), (t 8-15, n 0-7),
      // (t 8-15, n 8-15) of the staged block, transposed (A is dY^T: rows n, k = t).
#pragma unroll
      for (int mi = 0; mi < 2; ++mi)
#pragma unroll
        for (int ks = 0; ks < KT; ++ks)
          ldsm_x4_trans(stage_u32 + (ks * 16 + (mat >> 1) * 8 + mrow) * kStageRow + (mi * 16 + (mat & 1) * 8) * 2,
                        a[mi][ks]);
      __syncwarp();  // the stage is free for the output
    }
    float acc[2][8][4];
#pragma unroll
    for (int mi = 0; mi < 2; ++mi)
#pragma unroll
      for (int j = 0; j < 8; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[mi][j][e] = 0.0f;
#pragma unroll
    for (int ks = 0; ks < KT; ++ks) {
#pragma unroll
      for (int jp = 0; jp < 4; ++jp) {
        // B fragments of n8 tiles 2jp, 2jp+1: matrices (t 0-7, tile 2jp), (t 8-15, 2jp), (t 0-7, 2jp+1),
        // (t 8-15, 2jp+1) of act (rows t, 8 columns), transposed.
        const int t = ks * 16 + (mat & 1) * 8 + mrow, p = chunk * 8 + 2 * jp + (mat >> 1);
        uint32_t b[4];
        ldsm_x4_trans(act_u32 + uint32_t(t * pieces + (p ^ (t & 7))) * 16u, b);
#pragma unroll
        for (int mi = 0; mi < 2; ++mi) {
          mma_16816(acc[mi][2 * jp], a[mi][ks], b[0], b[1]);
          mma_16816(acc[mi][2 * jp + 1], a[mi][ks], b[2], b[3]);
        }
      }
    }
    // bf16 pairs into the stage as 32 rows of 128 bytes (piece j of row r at j ^ (r & 7)), then each lane
    // writes whole 16-byte pieces: a warp's store covers four 128-byte lines of dW.
#pragma unroll
    for (int mi = 0; mi < 2; ++mi)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int r = mi * 16 + h * 8 + g;
#pragma unroll
        for (int j = 0; j < 8; ++j)
          *reinterpret_cast<uint32_t*>(stage + r * 128 + ((j ^ (r & 7)) * 16) + q * 4) =
              pack_bf16x2(acc[mi][j][2 * h], acc[mi][j][2 * h + 1]);
      }
    __syncwarp();
    const size_t col = size_t(col0) + size_t(chunk) * kCols;
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      const int idx = k * 32 + lane, r = idx >> 3, p = idx & 7;
      const uint4 v = *reinterpret_cast<const uint4*>(stage + r * 128 + ((p ^ (r & 7)) * 16));
      if (n0 + r < N) *reinterpret_cast<uint4*>(dW + size_t(n0 + r) * D + col + p * 8) = v;
    }
  }
}

// Column groups: the fewest whose act columns (16 * KT rows) fit kActSmemMax; 0 when none does.
int column_groups(int64_t T, int64_t D) {
  if (T < 1 || T > 64 || D % kCols != 0) return 0;
  const int64_t chunks = D / kCols, kt = (T + 15) / 16;
  for (int64_t g = 1; g <= chunks; ++g)
    if (chunks % g == 0 && (chunks / g) * kCols * 16 * kt * 2 <= kActSmemMax) return int(g);
  return 0;
}

template <int KT>
int launch(const void* dY, const void* act, void* dW, int T, int N, int D, int groups, int sms, cudaStream_t stream,
           Err err) {
  const int cpg = D / kCols / groups;
  const size_t bytes = size_t(16 * KT) * cpg * kCols * 2 + size_t(kWarps) * kWarpStage;
  cudaError_t ce = cudaFuncSetAttribute(dw_mma_kernel<KT>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes));
  if (ce != cudaSuccess) {
    set_err(err, "dW kernel (mma.sync): %zu bytes of shared memory: %s", bytes, cudaGetErrorString(ce));
    return ADALN_LAUNCH;
  }
  const int per_group = sms / groups > 0 ? sms / groups : 1;
  dw_mma_kernel<KT><<<per_group * groups, kWarps * 32, bytes, stream>>>(
      static_cast<const __nv_bfloat16*>(dY), static_cast<const __nv_bfloat16*>(act),
      static_cast<__nv_bfloat16*>(dW), T, N, D, groups, cpg);
  ce = cudaGetLastError();
  if (ce != cudaSuccess) {
    set_err(err, "dW kernel (mma.sync) launch: %s", cudaGetErrorString(ce));
    return ADALN_LAUNCH;
  }
  return ADALN_OK;
}

}  // namespace

bool dw_mma_fits(int64_t T, int64_t D, int64_t N) { return column_groups(T, D) > 0 && N < (int64_t(1) << 31); }

int dw_mma(const void* dY, const void* act, void* dW, int64_t T, int64_t D, int64_t N, int sm_count,
           cudaStream_t stream, Err err) {
  const int groups = column_groups(T, D);
  if (groups == 0 || N >= (int64_t(1) << 31)) {
    set_err(err, "dW kernel (mma.sync) does not take T=%lld, D=%lld", (long long)T, (long long)D);
    return ADALN_BAD_ARGUMENT;
  }
  switch ((T + 15) / 16) {
    case 1: return launch<1>(dY, act, dW, int(T), int(N), int(D), groups, sm_count, stream, err);
    case 2: return launch<2>(dY, act, dW, int(T), int(N), int(D), groups, sm_count, stream, err);
    case 3: return launch<3>(dY, act, dW, int(T), int(N), int(D), groups, sm_count, stream, err);
    default: return launch<4>(dY, act, dW, int(T), int(N), int(D), groups, sm_count, stream, err);
  }
}

}  // namespace adaln
