// dW = dY^T . act for T <= 256 (K = T) on tensor cores (mma.sync m16n8k16, sm80 and later: both code paths),
// written as a store stream in row order. dW is a 520 MB write, and at small T what decides its time is the
// order of the writes (git:NOTES.md, "Store microbenchmark" and "v8 run 9"): the lines being written at any moment
// should make a narrow band of whole rows, not be spread over the matrix. From about T = 100 the arithmetic
// (67 GFLOP at T = 128) costs as much as the write and mostly adds to it (git:NOTES.md "v10 run 18": every warp of a
// block computes, then stores, then meets the others at the barrier); the tiers above 64 rows keep the most
// mma work between barriers that their registers allow.
//
// Each warp owns one chunk of 8 NJ columns of dW for the whole kernel: its act values are B fragments in
// registers, loaded once (KT * NJ * 2 registers: the tiers below trade columns a warp for k-steps). A block of
// W warps covers W adjacent chunks; G = D / (8 NJ W) blocks side by side cover whole rows. Block k of each
// column group walks the row blocks (16 MR rows each) k, k + P, k + 2P, ... (P blocks per group), so at any
// moment the G·P blocks write a band of about P·16 MR whole rows. The block copies dY[0:T, rows] of its next row
// blocks into a
// ring of stages in shared memory (cp.async, ADALN_DWMMA_STAGES - 1 blocks ahead; one barrier per row block
// keeps the block's warps together), each warp forms the A fragments with ldmatrix.trans (one per k-step and
// m-tile, used by NJ mma.sync), and writes its 16 MR x 8 NJ bf16 result through its own stage as whole 16-byte
// pieces.
// One block barrier per row block, no other. The order of each sum depends on T only (dW is compared with itself).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "gemms.h"
#include "pdl.cuh"
#include "status.h"

namespace adaln {
namespace {

// Three tiers by T, each with its columns a warp (8 NJ), its most warps a block (W divides D / (8 NJ) and is at
// most the tier's bound, at least 3 where the bound allows) and its blocks per SM:
//   small, T <= 64:        NJ 8, ADALN_DWMMA_WARPS x ADALN_DWMMA_BLOCKS (shipped v8: 14 x 1, the fastest of
//                          14 x 1, 7 x 2, 6 x 2 on the H200 at T = 2-64: git:NOTES.md, "v8d run 12");
//   mid, 64 < T <= 128:    ADALN_DWMMA_MID_NJ, ADALN_DWMMA_MID_WARPS x 1 (shipped v10: 4, 14, in 32-row
//                          steps: MR below; 16-row steps were 10-18 % slower, "v10.1 run 19");
//   large, 128 < T <= 256: ADALN_DWMMA_LARGE_NJ, ADALN_DWMMA_LARGE_WARPS x 1 (shipped v10: 4, 12; NJ 2 in 14
//                          warps was 27-37 % slower at T = 192-256: git:NOTES.md, "v10 run 18").
// The register file is split between the SM's four schedulers: 4 warps on one of them cap a thread at 128
// registers (the small tier at KT = 4 uses 128; the mid tier's KT = 8 with NJ 4 holds 64 of act), 3 warps at
// 168 (the large tier's KT = 16 with NJ 4 holds 128). Every tier has a ring of ADALN_DWMMA_STAGES row blocks of dY.
#ifndef ADALN_DWMMA_SMALL_NJ
#define ADALN_DWMMA_SMALL_NJ 8
#endif
#ifndef ADALN_DWMMA_WARPS
#define ADALN_DWMMA_WARPS 14
#endif
#ifndef ADALN_DWMMA_BLOCKS
#define ADALN_DWMMA_BLOCKS 1
#endif
#ifndef ADALN_DWMMA_MID_NJ
#define ADALN_DWMMA_MID_NJ 4
#endif
#ifndef ADALN_DWMMA_MID_WARPS
#define ADALN_DWMMA_MID_WARPS 14
#endif
#ifndef ADALN_DWMMA_LARGE_NJ
#define ADALN_DWMMA_LARGE_NJ 4
#endif
#ifndef ADALN_DWMMA_LARGE_WARPS
#define ADALN_DWMMA_LARGE_WARPS 12
#endif
#ifndef ADALN_DWMMA_STAGES
#define ADALN_DWMMA_STAGES 4
#endif
#ifndef ADALN_DWMMA_SMALL_MR
#define ADALN_DWMMA_SMALL_MR 1
#endif
#ifndef ADALN_DWMMA_MID_MR
#define ADALN_DWMMA_MID_MR 2
#endif
#ifndef ADALN_DWMMA_LARGE_MR
#define ADALN_DWMMA_LARGE_MR 1
#endif
// MR: 16-row m-tiles a step (rows of dW per row block: 16 MR; more independent mma chains a warp). Shipped: 2 in
// the middle tier only (in 7 warps, which the small and large tiers would need for the registers, it lost:
// git:NOTES.md "v10.2 run 20").
template <int NJ_, int MaxWarps_, int Blocks_, int MR_>
struct Tier {
  static constexpr int NJ = NJ_, kMaxWarps = MaxWarps_, kBlocks = Blocks_, MR = MR_;
  static constexpr int kMinWarps = MaxWarps_ < 3 ? MaxWarps_ : 3;
  static constexpr int kCols = 8 * NJ;                 // columns per warp (NJ n8 tiles)
  static constexpr int kRows = 16 * MR;                // rows of dW per step
  static constexpr int kStageRow = 32 * MR + 16;       // bytes per t row of staged dY (+16: ldmatrix's eight
                                                       // rows on distinct banks)
  static constexpr int kOutStage = kRows * 16 * NJ;    // the warp's kRows x kCols bf16 result
  static_assert(NJ == 2 || NJ == 4 || NJ == 8, "columns a warp: 16, 32 or 64");
  static_assert(MR == 1 || MR == 2, "16 or 32 rows a step");
  __host__ __device__ static constexpr int in_stage_bytes(int kt) { return 16 * kt * kStageRow; }
};
using Small = Tier<ADALN_DWMMA_SMALL_NJ, ADALN_DWMMA_WARPS, ADALN_DWMMA_BLOCKS, ADALN_DWMMA_SMALL_MR>;
using Mid = Tier<ADALN_DWMMA_MID_NJ, ADALN_DWMMA_MID_WARPS, 1, ADALN_DWMMA_MID_MR>;
using Large = Tier<ADALN_DWMMA_LARGE_NJ, ADALN_DWMMA_LARGE_WARPS, 1, ADALN_DWMMA_LARGE_MR>;
constexpr int kMaxT = 256;
// The tier of KT = ceil(T / 16) k-steps: the one place the tiers' bounds (64, 128, 256 rows) are written.
template <int KT>
using TierFor = std::conditional_t<(KT <= 4), Small, std::conditional_t<(KT <= 8), Mid, Large>>;

constexpr int kStages = ADALN_DWMMA_STAGES;  // a power of two
static_assert(kStages >= 2 && (kStages & (kStages - 1)) == 0, "ADALN_DWMMA_STAGES: 2, 4, 8...");
// Shared memory: kStages stages of dY (16 KT rows each), then one output stage per warp.
template <class Cfg>
__host__ __device__ constexpr int smem_bytes(int kt, int warps) {
  return kStages * Cfg::in_stage_bytes(kt) + warps * Cfg::kOutStage;
}

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// Four 8x8 bf16 matrices, each transposed on the way in (lane i gives the address of row i % 8 of matrix i / 8).
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

__device__ __forceinline__ uint32_t pack_raw(__nv_bfloat16 lo, __nv_bfloat16 hi) {
  return uint32_t(__bfloat16_as_ushort(lo)) | (uint32_t(__bfloat16_as_ushort(hi)) << 16);
}

// 16 bytes global -> shared, bypassing L1; src_bytes = 0 writes zeros (rows of dY past N).
__device__ __forceinline__ void cp_async16(uint32_t dst, const void* src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

// dY[0:T, n0:n0+16 MR) into a stage (t rows of 32 MR bytes, kStageRow apart): piece i is row i / (2 MR), 16-byte
// piece i % (2 MR).
template <class Cfg>
__device__ __forceinline__ void copy_dy(const __nv_bfloat16* __restrict__ dY, int T, int N, int n0, uint32_t stage) {
  constexpr int kPieces = 2 * Cfg::MR, kShift = Cfg::MR == 1 ? 1 : 2;  // MR is 1 or 2
  for (int i = threadIdx.x; i < kPieces * T; i += blockDim.x) {
    const int t = i >> kShift, piece = i & (kPieces - 1), n = n0 + piece * 8;
    const bool in = n < N;
    cp_async16(stage + t * Cfg::kStageRow + piece * 16, in ? dY + size_t(t) * N + n : dY, in ? 16 : 0);
  }
}

// KT = ceil(T / 16) k-steps (rows t >= T are zeros). Grid: G column groups of P blocks; blockDim = 32 W.
template <int KT, class Cfg>
__global__ void __launch_bounds__(Cfg::kMaxWarps * 32, Cfg::kBlocks)
    dw_mma_kernel(const __nv_bfloat16* __restrict__ dY, const __nv_bfloat16* __restrict__ act,
                  __nv_bfloat16* __restrict__ dW, int T, int N, int D, int groups) {
  wait_for_previous_kernel();
  release_next_kernel();
  constexpr int NJ = Cfg::NJ, MR = Cfg::MR, kRows = Cfg::kRows, kStageRow = Cfg::kStageRow;
  constexpr int kRowBytes = 16 * NJ;  // bytes of one output row of the warp
  constexpr int kInStage = Cfg::in_stage_bytes(KT);
  extern __shared__ __align__(128) unsigned char smem[];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  const int per_group = gridDim.x / groups, group = blockIdx.x / per_group, block = blockIdx.x % per_group;
  const int col0 = (group * warps + warp) * Cfg::kCols;  // this warp's columns of dW
  unsigned char* in_stages = smem;
  unsigned char* out_stage = smem + kStages * kInStage + warp * Cfg::kOutStage;
  const uint32_t in_u32 = smem_u32(in_stages);
  // Rows T .. 16 KT of every stage stay zero (the copies write rows < T only).
  for (int i = threadIdx.x; i < kStages * (16 * KT - T) * 2 * MR; i += blockDim.x) {
    const int stage = i / ((16 * KT - T) * 2 * MR), r = i % ((16 * KT - T) * 2 * MR);
    *reinterpret_cast<uint4*>(in_stages + stage * kInStage + (T + r / (2 * MR)) * kStageRow + (r & (2 * MR - 1)) * 16) =
        make_uint4(0u, 0u, 0u, 0u);
  }
  const int g = lane >> 2, q = lane & 3;  // fragment row (n) / column pair

  // B fragments of the warp's columns, all k-steps: b[ks][j] = act[ks*16 + 2q + {0,1} (+8)][col0 + 8j + g].
  uint32_t b[KT][NJ][2];
#pragma unroll
  for (int ks = 0; ks < KT; ++ks)
#pragma unroll
    for (int j = 0; j < NJ; ++j)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int t = ks * 16 + h * 8 + 2 * q;
        const __nv_bfloat16* p = act + size_t(t) * D + col0 + 8 * j + g;
        const __nv_bfloat16 zero = __float2bfloat16(0.0f);
        b[ks][j][h] = pack_raw(t < T ? p[0] : zero, t + 1 < T ? p[D] : zero);
      }

  const int row_blocks = (N + kRows - 1) / kRows;
  const int mat = lane >> 3, mrow = lane & 7;  // the ldmatrix row this lane addresses
  // This block's row blocks: block + i * per_group for i < count; one cp.async group per row block, committed
  // even when empty so that "all but the newest kStages - 2 groups" always means "row block i".
  const int count = block < row_blocks ? (row_blocks - 1 - block) / per_group + 1 : 0;
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < count) copy_dy<Cfg>(dY, T, N, (block + s * per_group) * kRows, in_u32 + s * kInStage);
    cp_async_commit();
  }
  for (int i = 0; i < count; ++i) {
    const int n0 = (block + i * per_group) * kRows;
    cp_async_wait<kStages - 2>();
    __syncthreads();  // row block i's copies (every thread's) have landed; every warp is done with step i - 1
    {
      const int ahead = i + kStages - 1;  // into the stage row block i - 1 used
      if (ahead < count)
        copy_dy<Cfg>(dY, T, N, (block + ahead * per_group) * kRows, in_u32 + (ahead % kStages) * kInStage);
      cp_async_commit();
    }
    const uint32_t stage_u32 = in_u32 + (i % kStages) * kInStage;

    float acc[MR][NJ][4];
#pragma unroll
    for (int m = 0; m < MR; ++m)
#pragma unroll
      for (int j = 0; j < NJ; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[m][j][e] = 0.0f;
#pragma unroll
    for (int ks = 0; ks < KT; ++ks) {
#pragma unroll
      for (int m = 0; m < MR; ++m) {
        // A fragment of m-tile m (rows n, k = t): matrices (t 0-7, n 0-7), (t 0-7, n 8-15), (t 8-15, n 0-7),
        // (t 8-15, n 8-15).
        uint32_t a[4];
        ldsm_x4_trans(stage_u32 + (ks * 16 + (mat >> 1) * 8 + mrow) * kStageRow + m * 32 + (mat & 1) * 16, a);
#pragma unroll
        for (int j = 0; j < NJ; ++j) mma_16816(acc[m][j], a, b[ks][j][0], b[ks][j][1]);
      }
    }

    // bf16 pairs into the stage as kRows rows of kRowBytes (piece j of row r at j ^ swz(r), swz(r) = (r / (8 /
    // NJ)) % NJ: the eight rows one store instruction touches land on distinct banks), then whole 16-byte pieces
    // out.
#pragma unroll
    for (int m = 0; m < MR; ++m)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int r = m * 16 + h * 8 + g, swz = (r / (8 / NJ)) % NJ;
#pragma unroll
        for (int j = 0; j < NJ; ++j)
          *reinterpret_cast<uint32_t*>(out_stage + r * kRowBytes + ((j ^ swz) * 16) + q * 4) =
              pack_bf16x2(acc[m][j][2 * h], acc[m][j][2 * h + 1]);
      }
    __syncwarp();
#pragma unroll
    for (int k = 0; k < MR * NJ / 2; ++k) {
      const int idx = k * 32 + lane, r = idx / NJ, p = idx % NJ, swz = (r / (8 / NJ)) % NJ;
      const uint4 v = *reinterpret_cast<const uint4*>(out_stage + r * kRowBytes + ((p ^ swz) * 16));
      if (n0 + r < N) *reinterpret_cast<uint4*>(dW + size_t(n0 + r) * D + col0 + p * 8) = v;
    }
  }
}

// Warps per block of a tier: the largest divisor of D / kCols in [kMinWarps, kMaxWarps]; 0 when none.
template <class Cfg>
int tier_warps(int64_t D) {
  if (D % Cfg::kCols != 0) return 0;
  const int64_t chunks = D / Cfg::kCols;
  for (int w = Cfg::kMaxWarps; w >= Cfg::kMinWarps; --w)
    if (chunks % w == 0) return w;
  return 0;
}

// f(std::integral_constant<int, KT>) for KT = ceil(T / 16), 1 <= T <= kMaxT.
template <class F>
int with_kt(int64_t T, F&& f) {
#define ADALN_DWMMA_CASE(KT) \
  case KT:                   \
    return f(std::integral_constant<int, KT>{});
  switch ((T + 15) / 16) {
    ADALN_DWMMA_CASE(1) ADALN_DWMMA_CASE(2) ADALN_DWMMA_CASE(3) ADALN_DWMMA_CASE(4) ADALN_DWMMA_CASE(5)
    ADALN_DWMMA_CASE(6) ADALN_DWMMA_CASE(7) ADALN_DWMMA_CASE(8) ADALN_DWMMA_CASE(9) ADALN_DWMMA_CASE(10)
    ADALN_DWMMA_CASE(11) ADALN_DWMMA_CASE(12) ADALN_DWMMA_CASE(13) ADALN_DWMMA_CASE(14) ADALN_DWMMA_CASE(15)
    default: return f(std::integral_constant<int, 16>{});
  }
#undef ADALN_DWMMA_CASE
}
static_assert(kMaxT == 16 * 16, "with_kt's cases end at KT = 16");

// The tier's warps per block for this T, 0 when T is out of range or D has no fitting divisor.
int warps_per_block(int64_t T, int64_t D) {
  if (T < 1 || T > kMaxT) return 0;
  return with_kt(T, [&](auto kt) { return tier_warps<TierFor<decltype(kt)::value>>(D); });
}

template <int KT, class Cfg>
int launch(const void* dY, const void* act, void* dW, int T, int N, int D, int warps, int sms, cudaStream_t stream,
           Err err) {
  const int groups = D / Cfg::kCols / warps;
  const size_t bytes = size_t(smem_bytes<Cfg>(KT, warps));
  cudaError_t ce =
      cudaFuncSetAttribute(dw_mma_kernel<KT, Cfg>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes));
  if (ce != cudaSuccess) {
    set_err(err, "dW kernel (mma.sync): %zu bytes of shared memory: %s", bytes, cudaGetErrorString(ce));
    return ADALN_LAUNCH;
  }
  const int slots = sms * Cfg::kBlocks, per_group = slots / groups > 0 ? slots / groups : 1;
  ce = launch_kernel(dw_mma_kernel<KT, Cfg>, dim3(unsigned(per_group * groups)), dim3(unsigned(warps * 32)), bytes,
                     stream, static_cast<const __nv_bfloat16*>(dY), static_cast<const __nv_bfloat16*>(act),
                     static_cast<__nv_bfloat16*>(dW), T, N, D, groups);
  if (ce != cudaSuccess) {
    set_err(err, "dW kernel (mma.sync) launch: %s", cudaGetErrorString(ce));
    return ADALN_LAUNCH;
  }
  return ADALN_OK;
}

}  // namespace

bool dw_mma_fits(int64_t T, int64_t D, int64_t N) { return warps_per_block(T, D) > 0 && N < (int64_t(1) << 31); }

int dw_mma(const void* dY, const void* act, void* dW, int64_t T, int64_t D, int64_t N, int sm_count,
           cudaStream_t stream, Err err) {
  const int warps = warps_per_block(T, D);
  if (warps == 0 || N >= (int64_t(1) << 31)) {
    set_err(err, "dW kernel (mma.sync) does not take T=%lld, D=%lld", (long long)T, (long long)D);
    return ADALN_BAD_ARGUMENT;
  }
  return with_kt(T, [&](auto kt) {
    constexpr int KT = decltype(kt)::value;
    return launch<KT, TierFor<KT>>(dY, act, dW, int(T), int(N), int(D), warps, sm_count, stream, err);
  });
}

}  // namespace adaln
