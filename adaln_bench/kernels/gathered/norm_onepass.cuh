// norm_modulate / final_adaln_out backward in one pass over x and dy (v3; included by gathered.cu, whose helpers
// it uses). docs/kernels.md has the design and the measurement.
//
// The two-pass backward (norm_dx_kernel, then a column kernel) reads x and dy twice because a row's dx needs the
// row's full dot product while the table sums need per-column partials for all table entries: too much state for
// one CTA (9 entries x 2 sums x H x fp32 = 387 KB). Here a CTA owns ONE table entry, so its state is 2 x H fp32
// (43 KB, 16 registers a thread at H = 5376), and it walks whole rows of that entry only:
//   1. count kernel: per block of consecutive tokens, how many tokens each entry has (integers);
//   2. scatter kernel: a stable partition of the token positions by entry (perm), from the counts' prefix sums;
//      a token with an out-of-range index gets a NaN dx row here and is left out of every sum;
//   3. one-pass kernel: the rows of entry e, in ascending token order, are cut into tiles of T = ceil(S / (126 -
//      ne)) rows (so there are at most 126 tiles, one CTA each, one wave on 126+ SMs). A CTA streams its tile's
//      rows of x and dy through a cp.async ring, computes each row's dot product (a fixed shuffle tree in each warp,
//      warps added in order), writes dx, and sums dy * x * rstd and dy for its columns in fp32 in row order; at the
//      end it writes the tile's 2 x H fp32 partial;
//   4. fold kernel: per entry, its tiles added in tile (= token) order, rounded to bf16 once.
// Every sum's order depends on the data and S only (T, the tiles, the count blocks), never on the GPU; dx of a row
// depends on the row alone. No atomics. Workspace: counts + perm (4 B a token) + 126 x 2 x H x 4 B of tiles.

constexpr int kOnePassCtas = 126;       // tiles at most; grid of the one-pass kernel
// Rows of x and dy staged per CTA: the deeper ring where it fits the device's shared memory per block (10 rows are
// 215 KB at H = 5376; at H = 6144 only 8 fit), else 8. The ring only stages rows: the bits are the same for both.
constexpr int kOnePassRingDeep = 10;
constexpr int kOnePassRing = 8;
constexpr int kOnePassBatch = 4;        // rows per block reduction (ring - kOnePassBatch rows in flight at least)
constexpr int kOnePassMaxThreads = 768;  // one 8-column vector a thread: H <= 6144 (else the two-pass backward)
constexpr int kCountBlocks = 128;       // blocks of the count and scatter kernels (at most)
constexpr int kCountMinTokens = 1024;   // tokens per count block (at least)
constexpr int kScatterThreads = 1024;
constexpr int kMaxEntries = 9;          // + 1 slot for out-of-range indices

struct OnePassLayout {
  int64_t nb = 0, cb = 0;  // count blocks, tokens per count block
  int64_t tile_rows = 0;   // T
  size_t counts = 0, totals = 0, perm = 0, tiles = 0, bytes = 0;  // byte offsets in the workspace, total size
};

inline size_t round16(size_t v) { return (v + 15) & ~(size_t)15; }

OnePassLayout onepass_layout(int64_t S, int64_t H, int ne) {
  OnePassLayout L;
  if (S < 1) return L;
  int64_t nb = (S + kCountMinTokens - 1) / kCountMinTokens;
  L.nb = nb < kCountBlocks ? nb : kCountBlocks;
  L.cb = (S + L.nb - 1) / L.nb;
  L.tile_rows = (S + (kOnePassCtas - ne) - 1) / (kOnePassCtas - ne);
  size_t off = 0;
  L.counts = off;
  off = round16(off + (size_t)L.nb * (ne + 1) * sizeof(int));
  L.totals = off;
  off = round16(off + 16 * sizeof(int));
  L.perm = off;
  off = round16(off + (size_t)S * sizeof(int));
  L.tiles = off;
  off += (size_t)kOnePassCtas * 2 * H * sizeof(float);
  L.bytes = off;
  return L;
}

bool onepass_fits(int64_t H) { return (H / 8 + 31) / 32 * 32 <= kOnePassMaxThreads; }
int onepass_threads(int64_t H) { return (int)((H / 8 + 31) / 32 * 32); }
size_t onepass_smem(int threads, int ring) { return (size_t)ring * 2 * threads * sizeof(uint4); }
constexpr size_t kOnePassStaticSmem = 2 * kOnePassBatch * 32 * sizeof(float);  // the kernel's red[][][]
// The ring a call at H uses given the device's opt-in shared memory per block (bytes).
int onepass_ring_for(int64_t H, size_t smem_optin) {
  return onepass_smem(onepass_threads(H), kOnePassRingDeep) + kOnePassStaticSmem <= smem_optin ? kOnePassRingDeep
                                                                                              : kOnePassRing;
}

__device__ __forceinline__ int warp_sum_int(int v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// counts[b][e] = tokens of block b (cb consecutive tokens) with index e; e = ne counts the out-of-range ones.
__global__ void __launch_bounds__(256) onepass_count_kernel(const int64_t* __restrict__ idx, int64_t S, int ne,
                                                            int64_t cb, int* __restrict__ counts) {
  __shared__ int part[8][kMaxEntries + 1];
  const int64_t b0 = (int64_t)blockIdx.x * cb;
  const int64_t b1 = b0 + cb < S ? b0 + cb : S;
  int c[kMaxEntries + 1];
#pragma unroll
  for (int e = 0; e <= kMaxEntries; ++e) c[e] = 0;
  for (int64_t i = b0 + threadIdx.x; i < b1; i += blockDim.x) {
    const int64_t k = idx[i];
    const int kk = (k >= 0 && k < ne) ? (int)k : ne;
#pragma unroll
    for (int e = 0; e <= kMaxEntries; ++e) c[e] += kk == e;
  }
  const int w = threadIdx.x >> 5, l = threadIdx.x & 31;
#pragma unroll
  for (int e = 0; e <= kMaxEntries; ++e) {
    const int s = warp_sum_int(c[e]);
    if (l == 0) part[w][e] = s;
  }
  __syncthreads();
  if (threadIdx.x <= ne) {
    int s = 0;
    for (int ww = 0; ww < (int)(blockDim.x >> 5); ++ww) s += part[ww][threadIdx.x];
    counts[(int64_t)blockIdx.x * (ne + 1) + threadIdx.x] = s;
  }
}

// perm: the positions of entry 0's tokens in ascending order, then entry 1's, ...; totals[e]: tokens of entry e.
// dx_nan (may be null): rows of out-of-range tokens set to NaN.
__global__ void __launch_bounds__(kScatterThreads) onepass_scatter_kernel(const int64_t* __restrict__ idx, int64_t S,
                                                                          int ne, int64_t cb, int nb,
                                                                          const int* __restrict__ counts,
                                                                          int* __restrict__ totals,
                                                                          int* __restrict__ perm, bf16* dx_nan, int H) {
  __shared__ int stot[kMaxEntries + 1], sbef[kMaxEntries + 1], base[kMaxEntries], chunk[kMaxEntries];
  __shared__ int wcnt[32][kMaxEntries], woff[32][kMaxEntries];
  const int w = threadIdx.x >> 5, l = threadIdx.x & 31;
  if (w <= ne) {  // warp e: entry e's total and its count in the blocks before this one
    int tot = 0, bef = 0;
    for (int bb = l; bb < nb; bb += 32) {
      const int v = counts[(int64_t)bb * (ne + 1) + w];
      tot += v;
      if (bb < (int)blockIdx.x) bef += v;
    }
    tot = warp_sum_int(tot);
    bef = warp_sum_int(bef);
    if (l == 0) {
      stot[w] = tot;
      sbef[w] = bef;
    }
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    int acc = 0;
    for (int e = 0; e < ne; ++e) {
      base[e] = acc + sbef[e];
      acc += stot[e];
      if (blockIdx.x == 0) totals[e] = stot[e];
    }
  }
  __syncthreads();
  const int64_t b0 = (int64_t)blockIdx.x * cb;
  const int64_t b1 = b0 + cb < S ? b0 + cb : S;
  const unsigned lt = (1u << l) - 1u;
  for (int64_t c0 = b0; c0 < b1; c0 += blockDim.x) {
    const int64_t i = c0 + threadIdx.x;
    const bool valid = i < b1;
    const int64_t k = valid ? idx[i] : -1;
    const bool ok = valid && k >= 0 && k < ne;
    int rank = 0;
    for (int e = 0; e < ne; ++e) {
      const unsigned m = __ballot_sync(0xffffffffu, ok && k == e);
      if (l == 0) wcnt[w][e] = __popc(m);
      if (ok && k == e) rank = __popc(m & lt);
    }
    __syncthreads();
    if (threadIdx.x < ne) {
      int s = 0;
      for (int ww = 0; ww < (int)(blockDim.x >> 5); ++ww) {
        woff[ww][threadIdx.x] = s;
        s += wcnt[ww][threadIdx.x];
      }
      chunk[threadIdx.x] = s;
    }
    __syncthreads();
    if (ok) perm[base[k] + woff[w][k] + rank] = (int)i;
    if (valid && !ok && dx_nan) {
      float f[8];
#pragma unroll
      for (int e = 0; e < 8; ++e) f[e] = kNaN;
      const uint4 nan4 = pack<8>(f);
      for (int c = 0; c < H; c += 8) st<8>(dx_nan + i * H + c, nan4);
    }
    __syncthreads();
    if (threadIdx.x < ne) base[threadIdx.x] += chunk[threadIdx.x];
    __syncthreads();
  }
}

template <int N>
__device__ __forceinline__ void cp_wait_n() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// The tile of CTA blockIdx.x: entry e, first position in perm, rows. Tiles are numbered entry by entry, each
// entry's in token order. Returns false for a CTA beyond the last tile.
__device__ __forceinline__ bool onepass_tile(const int* __restrict__ totals, int ne, int64_t T, int& e, int& start,
                                             int& n) {
  int64_t tiles_before = 0, rows_before = 0;
  for (int ee = 0; ee < ne; ++ee) {
    const int64_t cnt = totals[ee];
    const int64_t te = (cnt + T - 1) / T;
    if ((int64_t)blockIdx.x < tiles_before + te) {
      const int64_t j = blockIdx.x - tiles_before;
      e = ee;
      start = (int)(rows_before + j * T);
      n = (int)(cnt - j * T < T ? cnt - j * T : T);
      return true;
    }
    tiles_before += te;
    rows_before += cnt;
  }
  return false;
}

// One CTA = one tile of one entry's rows; thread t owns columns 8t..8t+7. The ring holds R rows of x
// and dy (each thread copies and reads back only its own 16-byte pieces, so cp.async.wait_group is the only
// synchronisation it needs). g = dy * w * (1 + sc[e]), n = x * rstd, dot = sum(g * n), dx = rstd * (g - n * dot / H)
// (norm_dx_kernel's formula); P += dy * n, Q += dy for the tile partial.
template <int R>
__global__ void __launch_bounds__(kOnePassMaxThreads, 1)
    norm_bwd_onepass_kernel(const bf16* __restrict__ dy, const bf16* __restrict__ x, const bf16* __restrict__ w,
                            const bf16* __restrict__ sc, int64_t tstride, int ne, const float* __restrict__ rstd,
                            const int* __restrict__ perm, const int* __restrict__ totals, bf16* dx, int H, int64_t T,
                            float* tiles) {
  constexpr int B = kOnePassBatch;
  extern __shared__ __align__(16) uint4 ring[];  // [R][2][blockDim.x]
  __shared__ float red[2][B][32];
  int e = 0, start = 0, n = 0;
  if (!onepass_tile(totals, ne, T, e, start, n)) return;
  const int t = threadIdx.x, nt = blockDim.x, lane = t & 31, warp = t >> 5, nw = nt >> 5;
  const bool act = t < (H >> 3);
  const int64_t col = (int64_t)t * 8;
  float wv[8], s1[8], P[8], Q[8];
#pragma unroll
  for (int c = 0; c < 8; ++c) wv[c] = s1[c] = P[c] = Q[c] = 0.f;
  if (act) {
    unpack<8>(ldg<8>(w + col), wv);
    unpack<8>(ldg<8>(sc + e * tstride + col), s1);
#pragma unroll
    for (int c = 0; c < 8; ++c) s1[c] = 1.0f + s1[c];
  }
  const int* pl = perm + start;
  auto fetch = [&](int64_t tok, int slot) {
    cp_async16(&ring[(2 * slot) * nt + t], x + tok * H + col);
    cp_async16(&ring[(2 * slot + 1) * nt + t], dy + tok * H + col);
  };
#pragma unroll
  for (int s = 0; s < R; ++s) {
    if (act && s < n) fetch(pl[s], s);
    cp_commit();
  }
  int par = 0;
  for (int base = 0; base < n; base += B) {
    int64_t tok[B], ntok[B];  // this batch's rows, and the rows that refill their slots (loaded early)
    float rs[B];
#pragma unroll
    for (int u = 0; u < B; ++u) {
      const bool in = base + u < n;
      tok[u] = in ? pl[base + u] : 0;
      ntok[u] = base + u + R < n ? pl[base + u + R] : 0;
      rs[u] = in ? rstd[tok[u]] : 0.f;
    }
    cp_wait_n<R - B>();  // rows base .. base + B - 1 have landed (for this thread's pieces)
    float d[B];
#pragma unroll
    for (int u = 0; u < B; ++u) {
      d[u] = 0.f;
      if (act && base + u < n) {
        const int slot = (base + u) % R;
        float xf[8], df[8];
        unpack<8>(ring[(2 * slot) * nt + t], xf);
        unpack<8>(ring[(2 * slot + 1) * nt + t], df);
#pragma unroll
        for (int c = 0; c < 8; ++c) {
          const float nv = xf[c] * rs[u];
          d[u] = fmaf((df[c] * wv[c]) * s1[c], nv, d[u]);
          P[c] += df[c] * nv;
          Q[c] += df[c];
        }
      }
    }
#pragma unroll
    for (int u = 0; u < B; ++u) {
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) d[u] += __shfl_xor_sync(0xffffffffu, d[u], o);
      if (lane == 0) red[par][u][warp] = d[u];
    }
    __syncthreads();  // red[par] complete; red[par ^ 1] is rewritten only after the next barrier
    if (dx) {
#pragma unroll
      for (int u = 0; u < B; ++u) {
        if (!(act && base + u < n)) continue;
        float dot = red[par][u][0];
        for (int ww = 1; ww < nw; ++ww) dot += red[par][u][ww];
        const float cmean = dot / (float)H;
        const int slot = (base + u) % R;
        float xf[8], df[8], o[8];
        unpack<8>(ring[(2 * slot) * nt + t], xf);
        unpack<8>(ring[(2 * slot + 1) * nt + t], df);
#pragma unroll
        for (int c = 0; c < 8; ++c) {
          const float gv = (df[c] * wv[c]) * s1[c];
          o[c] = rs[u] * (gv - (xf[c] * rs[u]) * cmean);
        }
        st<8>(dx + tok[u] * H + col, pack<8>(o));
      }
    }
    par ^= 1;
#pragma unroll
    for (int u = 0; u < B; ++u) {
      const int nx = base + u + R;
      if (act && nx < n) fetch(ntok[u], (base + u) % R);
      cp_commit();
    }
  }
  cp_wait_all();
  if (tiles && act) {
    float* tp = tiles + (int64_t)blockIdx.x * 2 * H + col;
    *reinterpret_cast<float4*>(tp) = make_float4(P[0], P[1], P[2], P[3]);
    *reinterpret_cast<float4*>(tp + 4) = make_float4(P[4], P[5], P[6], P[7]);
    *reinterpret_cast<float4*>(tp + H) = make_float4(Q[0], Q[1], Q[2], Q[3]);
    *reinterpret_cast<float4*>(tp + H + 4) = make_float4(Q[4], Q[5], Q[6], Q[7]);
  }
}

// Per entry, its tiles' partials added in tile order, then rounded once: dsh[e] = bf16(Q_e), dsc[e] = bf16(w P_e),
// dw = bf16(sum_e (1 + sc[e]) P_e) with e ascending (fold_norm_kernel's formulas).
__global__ void onepass_fold_kernel(const float* __restrict__ tiles, const int* __restrict__ totals, int64_t T, int ne,
                                    int H, const bf16* __restrict__ w, const bf16* __restrict__ sc, int64_t tstride,
                                    bf16* dw, bf16* dsh, bf16* dsc, int64_t ostride) {
  const int64_t col = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (col >= H) return;
  const float wv = __bfloat162float(w[col]);
  float dwacc = 0.f;
  int64_t tb = 0;
  for (int e = 0; e < ne; ++e) {
    const int64_t te = (totals[e] + T - 1) / T;
    float P = 0.f, Q = 0.f;
    for (int64_t j = 0; j < te; ++j) {
      P += tiles[(tb + j) * 2 * H + col];
      Q += tiles[((tb + j) * 2 + 1) * H + col];
    }
    tb += te;
    if (dsh) dsh[e * ostride + col] = __float2bfloat16_rn(Q);
    if (dsc) dsc[e * ostride + col] = __float2bfloat16_rn(wv * P);
    dwacc = fmaf(1.0f + __bfloat162float(sc[e * tstride + col]), P, dwacc);
  }
  if (dw) dw[col] = __float2bfloat16_rn(dwacc);
}
