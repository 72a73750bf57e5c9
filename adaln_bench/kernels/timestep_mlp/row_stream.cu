// The weight-streaming row products of the timestep MLP at small T: D (M x T) = W (M x K) . act^T in fixed K slices,
// bit for bit what the CUTLASS GEMMs of gemm_impl.cuh give (so the path may follow T, gemm_3xtf32.cuh).
//
// One warp owns 16 weight rows of one K slice and up to 8 * NT activation rows (n tiles of 8, mma.sync m16n8k8
// TF32). Its weight rows stream through a ring of kStages k tiles of 32 in shared memory (cp.async, no block-wide
// barrier after the start), so that about kStages * 2 KB a warp are in flight; the CTA's K slice of the
// activations is loaded once into shared memory beside the rings.
//
// What makes the bits equal to CUTLASS's (gemm_impl.cuh with the multistage mainloop of CUTLASS 2.x):
//  * the same k values in the same instruction positions: k step j of a k tile holds k = 8j .. 8j+7 in mma
//    positions 0..7 (a0/a1: k = 8j + lane%4, a2/a3: k = 8j + 4 + lane%4), the order both CUTLASS's congruous and
//    crosswise shared-memory iterators load (the congruous one reads k rows in order; the crosswise one must agree
//    with it for the product to be right);
//  * the same split of both operands (rna big, rna small) and the same three products a step, small terms first,
//    into a fresh accumulator, in CUTLASS's order: its GemmUniversal computes a column-major D as the transposed
//    problem (D^T = act . W^T), so its mma A operand is the activations and its "A_small * B_big first" is
//    act_small * w_big, then act_big * w_small, then big * big;
//  * the same fold: CUTLASS's FastF32 mainloop stages its accumulation (UseStagedAccumulation): the step sums go
//    into a staging sum `tmp` (fp32 adds), and `tmp` is added to the output accumulator after the first step of every
//    k tile and once more at the end. So accum = (((0 + t0) + (((t1 + t2) + t3) + t4)) + (((t5 + t6) + t7) + t8)) ...
#include <cuda_runtime.h>

#include <cstdint>

#include "gemm_3xtf32.cuh"

namespace tmlp {
namespace {

constexpr int kTileK = 32;
#ifndef TMLP_STREAM_STAGES
#define TMLP_STREAM_STAGES 6
#endif
#ifndef TMLP_STREAM_WARPS
#define TMLP_STREAM_WARPS 4
#endif
constexpr int kWarps = TMLP_STREAM_WARPS;    // warps a CTA (each its own 16 weight rows of the CTA's K slice)
constexpr int kStages = TMLP_STREAM_STAGES;  // k tiles in flight a warp (3 CTAs an SM at T <= 8)
constexpr int kPadK = 4;    // the activation rows' padding (floats): lane (g, t) reads bank 4g + t, conflict free
// Experiment builds only (the device check's candidates if the bits ever stop matching): TMLP_STREAM_FOLD=1 adds
// every step sum straight into the accumulator (no staging), TMLP_STREAM_SWAP=1 swaps k 8j..8j+3 and 8j+4..8j+7.
#ifndef TMLP_STREAM_FOLD
#define TMLP_STREAM_FOLD 0
#endif
#ifndef TMLP_STREAM_SWAP
#define TMLP_STREAM_SWAP 0
#endif
constexpr int kSwap = TMLP_STREAM_SWAP ? 4 : 0;

// A k tile of 16 weight rows in shared memory, 2 KB, its 16-byte chunks swizzled so that a fragment load is free
// of bank conflicts: row-major weights as [16 rows][8 chunks], chunk q of row r at q ^ (r & 7); transposed weights
// (M contiguous) as [32 k][4 chunks], chunk q of k row r at q ^ (r & 2).
constexpr int kATileFloats = 16 * kTileK;

__device__ __forceinline__ void split(float x, uint32_t& big, uint32_t& small) {
  // exactly the converter gemm_3xtf32.cuh gives CUTLASS: big = rna(x), small = rna(x - big)
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(big) : "f"(x));
  const float rest = x - __uint_as_float(big);
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(small) : "f"(rest));
}

__device__ __forceinline__ void mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ void cp_async16(void* smem, const void* gmem) {
  const uint32_t s = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(gmem));
}
__device__ __forceinline__ void cp_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

// One k tile of the warp's 16 weight rows (m0..m0+15, k0..k0+31) into its ring slot: 128 chunks of 16 bytes, 4 a lane.
template <bool kTransposed>
__device__ __forceinline__ void load_a(float* slot, const float* __restrict__ w, int64_t ld, int64_t m0, int64_t k0,
                                       int lane) {
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int c = lane + 32 * i;
    if (kTransposed) {  // w is K x M (M contiguous): 32 k rows of 4 chunks
      const int kr = c >> 2, q = c & 3;
      cp_async16(slot + kr * 16 + 4 * (q ^ (kr & 2)), w + (k0 + kr) * ld + m0 + 4 * q);
    } else {  // w is M x K (K contiguous): 16 rows of 8 chunks
      const int r = c >> 3, q = c & 7;
      cp_async16(slot + r * kTileK + 4 * (q ^ (r & 7)), w + (m0 + r) * ld + k0 + 4 * q);
    }
  }
}

// The mma A fragment of k step j: a0 (row g, k 8j+t), a1 (g+8, 8j+t), a2 (g, 8j+t+4), a3 (g+8, 8j+t+4).
template <bool kTransposed>
__device__ __forceinline__ void frag_a(const float* slot, int j, int g, int t, float (&a)[4]) {
  if (kTransposed) {  // k rows 8j + t (a0, a1) and 8j + t + 4 (a2, a3); m = g in chunk g / 4, g + 8 in chunk g / 4 + 2
    const int r0 = 8 * j + t + kSwap, r1 = 8 * j + t + 4 - kSwap, sw = t & 2, q = g >> 2, e = g & 3;
    a[0] = slot[r0 * 16 + 4 * (q ^ sw) + e], a[1] = slot[r0 * 16 + 4 * ((q + 2) ^ sw) + e];
    a[2] = slot[r1 * 16 + 4 * (q ^ sw) + e], a[3] = slot[r1 * 16 + 4 * ((q + 2) ^ sw) + e];
  } else {  // rows g (a0, a2) and g + 8 (a1, a3), same swizzle; k 8j + t in chunk 2j, 8j + t + 4 in chunk 2j + 1
    const int c0 = (2 * j + (kSwap ? 1 : 0)) ^ g, c1 = (2 * j + (kSwap ? 0 : 1)) ^ g;
    a[0] = slot[g * kTileK + 4 * c0 + t], a[1] = slot[(g + 8) * kTileK + 4 * c0 + t];
    a[2] = slot[g * kTileK + 4 * c1 + t], a[3] = slot[(g + 8) * kTileK + 4 * c1 + t];
  }
}

// grid (ceil(M/16 / kWarps), slices, ceil(T / (8 NT))). out: slice s, row n, column m at out[s*M*T + n*M + m].
// bias (optional, one slice only): out = acc + bias[m] and act = silu(out), the arithmetic of bias_silu_kernel.
template <bool kTransposed, int NT>
__global__ void __launch_bounds__(kWarps * 32) row_stream_kernel(const float* __restrict__ w, int64_t ldw,
                                                                 const float* __restrict__ x, int64_t ldx, int M,
                                                                 int T, int ks, float* __restrict__ out,
                                                                 const float* __restrict__ bias,
                                                                 float* __restrict__ act) {
  extern __shared__ float4 smem4[];
  float* smem = reinterpret_cast<float*>(smem4);
  constexpr int kRows = 8 * NT;
  const int ldb = ks + kPadK;
  float* bsm = smem;                          // kRows x (ks + pad): this CTA's K slice of its activation rows
  float* ring = smem + kRows * ldb;           // kWarps rings of kStages A tiles
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = lane >> 2, t = lane & 3;
  const int slice = blockIdx.y;
  const int64_t kbase = (int64_t)slice * ks;
  const int n0 = blockIdx.z * kRows;

  // The activation rows n0.. of this slice (rows past T are zeros; their columns are not stored).
  const int chunks_row = ks / 4;
  for (int c = threadIdx.x; c < kRows * chunks_row; c += kWarps * 32) {
    const int r = c / chunks_row, q = c - r * chunks_row;
    float* dst = bsm + r * ldb + 4 * q;
    if (n0 + r < T)
      cp_async16(dst, x + (int64_t)(n0 + r) * ldx + kbase + 4 * q);
    else
      *reinterpret_cast<float4*>(dst) = make_float4(0.f, 0.f, 0.f, 0.f);
  }
  cp_commit();

  const int mblock = blockIdx.x * kWarps + warp;
  const bool active = mblock * 16 < M;
  const int64_t m0 = (int64_t)mblock * 16;
  float* my_ring = ring + warp * kStages * kATileFloats;
  const int tiles = ks / kTileK;
  const float* wk = w;  // A(m, k) = w[m * ldw + k] (row-major) or w[k * ldw + m] (transposed)
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (active && s < tiles)
      load_a<kTransposed>(my_ring + s * kATileFloats, wk, ldw, m0, kbase + s * kTileK, lane);
    cp_commit();
  }
  cp_wait<kStages - 1>();  // the activation group (the oldest) has landed
  __syncthreads();
  if (!active) return;

  float accum[NT][4], tmp[NT][4];
#pragma unroll
  for (int n = 0; n < NT; ++n)
#pragma unroll
    for (int r = 0; r < 4; ++r) accum[n][r] = 0.f, tmp[n][r] = 0.f;

  for (int i = 0; i < tiles; ++i) {
    cp_wait<kStages - 2>();
    __syncwarp();
    {  // refill the slot read in the previous iteration
      const int next = i + kStages - 1;
      if (next < tiles)
        load_a<kTransposed>(my_ring + (next % kStages) * kATileFloats, wk, ldw, m0,
                            kbase + (int64_t)next * kTileK, lane);
      cp_commit();
    }
    const float* slot = my_ring + (i % kStages) * kATileFloats;
    const float* brow = bsm + g * ldb + i * kTileK + t;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      float araw[4];
      frag_a<kTransposed>(slot, j, g, t, araw);
      uint32_t abig[4], asmall[4];
#pragma unroll
      for (int r = 0; r < 4; ++r) split(araw[r], abig[r], asmall[r]);
#pragma unroll
      for (int n = 0; n < NT; ++n) {
        const float* bp = brow + n * 8 * ldb + 8 * j;
        uint32_t b0big, b0small, b1big, b1small;
        split(bp[kSwap], b0big, b0small);
        split(bp[4 - kSwap], b1big, b1small);
        float step[4] = {0.f, 0.f, 0.f, 0.f};
        // CUTLASS's column-major output swaps the operands (D^T = act . W^T): its small-first order is
        // act_small * w_big, then act_big * w_small, then big * big
        mma(step, abig, b0small, b1small);
        mma(step, asmall, b0big, b1big);
        mma(step, abig, b0big, b1big);
#pragma unroll
        for (int r = 0; r < 4; ++r) tmp[n][r] = tmp[n][r] + step[r];
        if (j == 0 || TMLP_STREAM_FOLD) {
#pragma unroll
          for (int r = 0; r < 4; ++r) {
            accum[n][r] = accum[n][r] + tmp[n][r];
            tmp[n][r] = 0.f;
          }
        }
      }
    }
  }
  cp_wait<0>();

  // c0 (row g, col 2t), c1 (g, 2t+1), c2 (g+8, 2t), c3 (g+8, 2t+1)
  float* o = out + (int64_t)slice * M * T;
#pragma unroll
  for (int n = 0; n < NT; ++n) {
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      const int col = n0 + n * 8 + 2 * t + (r & 1);
      const int64_t m = m0 + g + 8 * (r >> 1);
      if (col < T) {
        float v = accum[n][r] + tmp[n][r];
        if (bias) {
          v += bias[m];
          act[(int64_t)col * M + m] = v / (1.0f + expf(-v));
        }
        o[(int64_t)col * M + m] = v;
      }
    }
  }
}

template <bool kTransposed, int NT>
size_t smem_bytes(int ks) {
  return sizeof(float) * ((size_t)8 * NT * (ks + kPadK) + (size_t)kWarps * kStages * kATileFloats);
}

constexpr size_t kMaxSmem = 200 * 1024;

int nt_for(int64_t T) { return T <= 8 ? 1 : (T <= 16 ? 2 : 4); }

template <bool kTransposed, int NT>
int launch(const BatchedGemm& g, const float* bias, float* act, cudaStream_t stream, const char** what) {
  const size_t bytes = smem_bytes<kTransposed, NT>(g.k);
  auto kernel = row_stream_kernel<kTransposed, NT>;
  cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes);
  if (e != cudaSuccess) {
    *what = "cudaFuncSetAttribute";
    return 1000 + (int)e;
  }
  const int mblocks = g.m / 16;
  dim3 grid((unsigned)((mblocks + kWarps - 1) / kWarps), (unsigned)g.batches, (unsigned)((g.n + 8 * NT - 1) / (8 * NT)));
  kernel<<<grid, kWarps * 32, bytes, stream>>>(g.a, g.lda, g.b, g.ldb, g.m, g.n, g.k, g.d, bias, act);
  e = cudaGetLastError();
  if (e != cudaSuccess) {
    *what = "launch";
    return 1000 + (int)e;
  }
  return 0;
}

}  // namespace

bool row_stream_fits(bool weight_transposed, const BatchedGemm& g) {
  const int64_t stride_a = weight_transposed ? (int64_t)g.k * g.lda : g.k;
  if (g.m % 16 || g.k % kTileK || g.ldd != g.m || g.stride_d != (int64_t)g.m * g.n || g.stride_b != g.k ||
      g.stride_a != stride_a || (g.n + 31) / 32 > 65535 || g.batches > 65535)
    return false;
  return smem_bytes<true, 4>(g.k) <= kMaxSmem;  // the largest of the instantiations
}

int row_stream(bool weight_transposed, const BatchedGemm& g, const float* bias, float* act, cudaStream_t stream,
               const char** what) {
  if (!row_stream_fits(weight_transposed, g) || (bias && g.batches != 1)) {
    *what = "row_stream shape";
    return 1;
  }
  const int nt = nt_for(g.n);
  if (weight_transposed) {
    if (nt == 1) return launch<true, 1>(g, bias, act, stream, what);
    if (nt == 2) return launch<true, 2>(g, bias, act, stream, what);
    return launch<true, 4>(g, bias, act, stream, what);
  }
  if (nt == 1) return launch<false, 1>(g, bias, act, stream, what);
  if (nt == 2) return launch<false, 2>(g, bias, act, stream, what);
  return launch<false, 4>(g, bias, act, stream, what);
}

}  // namespace tmlp
