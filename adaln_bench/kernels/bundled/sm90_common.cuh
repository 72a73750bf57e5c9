// CUTLASS 3.x Hopper (sm_90a) building blocks: TMA + wgmma, warp-specialized persistent kernels.
// `Sm90Gemm` is the one place a GEMM of this path is assembled (the forward, d_act and dW files only pick
// operand layouts, output type, epilogue and a tile configuration from sm90_config.h).
#pragma once
#include "sm90_config.h"  // first: it may turn on CUTLASS's grid dependency control (ADALN_PDL)
#include "tma_guard.cuh"  // before any CuTe header (see there)
#include "cute/tensor.hpp"
#include "cutlass/cutlass.h"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/epilogue/fusion/operations.hpp"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/gemm/collective/sm90_mma_tma_gmma_ss_warpspecialized_fp8.hpp"
#include "cutlass/gemm/device/gemm_universal_adapter.h"
#include "cutlass/gemm/dispatch_policy.hpp"
#include "cutlass/gemm/kernel/gemm_universal.hpp"
#include "cutlass/gemm/kernel/tile_scheduler.hpp"
#include "cutlass_run.cuh"
#include "gemms.h"
#include "pdl.cuh"

namespace adaln {
using namespace cute;
using bf16 = cutlass::bfloat16_t;

// A tile configuration: CTA tile (TM x TN x TK), cluster (ClusterM x ClusterN: CTAs of one cluster share the
// operand tile they have in common through TMA multicast), and the kernel schedule. Cooperative: both
// consumer warpgroups share one TM x TN tile (TM >= 128). Pingpong: each consumer warpgroup owns a whole
// TM x TN tile and its epilogue overlaps the other's mainloop (for short-K GEMMs). Neither changes an
// element's accumulation chain: fresh accumulator, k in order, 16 at a time.
// EpiN: the epilogue's subtile width along N (0: CUTLASS's choice, 32). A row-major output (dW: N contiguous)
// is stored in rows of EpiN elements, 64 bytes at the default, so a write-bound GEMM may want it wider.
// StoreStages: subtiles whose TMA store may be in flight while the next is written (0: the builder's choice,
// min(subtiles a tile, 2)); a write-bound GEMM may want more.
template <int TM, int TN, int ClusterM, bool Pingpong, int TK = 64, bool DirectStore = false, int ClusterN = 1,
          int EpiN = 0, int StoreStages = 0>
struct TileConfig {
  static constexpr int store_stages = StoreStages;
  using Tile = Shape<Int<TM>, Int<TN>, Int<TK>>;
  using EpilogueTile = cute::conditional_t<EpiN == 0, cutlass::epilogue::collective::EpilogueTileAuto,
                                           Shape<Int<(Pingpong ? 64 : (TM < 128 ? TM : 128))>, Int<EpiN>>>;
  using Cluster = Shape<Int<ClusterM>, Int<ClusterN>, _1>;
  using Mainloop = cute::conditional_t<Pingpong, cutlass::gemm::KernelTmaWarpSpecializedPingpong,
                                       cutlass::gemm::KernelTmaWarpSpecializedCooperative>;
  // DirectStore: registers straight to global memory (no smem staging, no TMA store), for a write-bound GEMM.
  using Epilogue = cute::conditional_t<
      DirectStore, cutlass::epilogue::NoSmemWarpSpecialized,
      cute::conditional_t<Pingpong, cutlass::epilogue::TmaWarpSpecialized,
                          cutlass::epilogue::TmaWarpSpecializedCooperative>>;
};

// The builder's mainloop with the tensor-core accumulator restarted every `mma_promotion_interval` k16 steps
// (one d_act chunk) and added into a main fp32 accumulator: S = ((0 + P0) + P1) + ..., each P a fresh chunk
// accumulation in k order. CUTLASS ships this as its FP8 "promotion" mainloop; nothing in it depends on the
// element type, so the bf16 operands and tiles the builder chose are kept and only the dispatch policy
// changes. It adds into the main accumulator without zeroing it, so `mma` clears it first.
template <class Regular>
struct ChunkSummed;
template <int Stages, class Cluster, class Schedule, class... Rest>
struct ChunkSummed<cutlass::gemm::collective::CollectiveMma<
    cutlass::gemm::MainloopSm90TmaGmmaWarpSpecialized<Stages, Cluster, Schedule>, Rest...>>
    : cutlass::gemm::collective::CollectiveMma<
          cutlass::gemm::MainloopSm90TmaGmmaWarpSpecializedFP8<Stages, Cluster, Schedule>, Rest...> {
  using Base = cutlass::gemm::collective::CollectiveMma<
      cutlass::gemm::MainloopSm90TmaGmmaWarpSpecializedFP8<Stages, Cluster, Schedule>, Rest...>;
  template <class FrgTensorC>
  CUTLASS_DEVICE void mma(typename Base::MainloopPipeline pipeline, typename Base::PipelineState smem_pipe_read,
                          FrgTensorC& accum, int k_tile_count, int thread_idx,
                          typename Base::TensorStorage& shared_tensors, typename Base::Params const& params) {
    cute::clear(accum);
    Base::mma(pipeline, smem_pipe_read, accum, k_tile_count, thread_idx, shared_tensors, params);
  }
};

// The builder's TMA epilogue with `Stages` store stages instead of its own (Stages = 0: unchanged). Only the
// dispatch policy's StagesD changes: the smem buffers for D and how many stores may be pending; the fusion
// callbacks and copy atoms are the builder's.
template <int Stages, class Epilogue>
struct WithStoreStages {
  using type = Epilogue;
};
template <int Stages, int StagesC, int StagesD, int FragmentSize, bool ReuseSmemC, bool DelayTmaStore, class... Rest>
struct WithStoreStages<Stages, cutlass::epilogue::collective::CollectiveEpilogue<
                                   cutlass::epilogue::Sm90TmaWarpSpecialized<StagesC, StagesD, FragmentSize, ReuseSmemC,
                                                                             DelayTmaStore>,
                                   Rest...>> {
  using type = cutlass::epilogue::collective::CollectiveEpilogue<
      cutlass::epilogue::Sm90TmaWarpSpecialized<StagesC, (Stages > 0 ? Stages : StagesD), FragmentSize, ReuseSmemC,
                                                DelayTmaStore>,
      Rest...>;
};

// One bf16 x bf16 -> fp32-accumulated GEMM with no C operand (ElementC = void): D = Fusion(acc).
// ChunkSums: the mainloop above (the caller sets the interval in the mainloop arguments).
template <class Config, class LayoutA, class LayoutB, class ElementD, class LayoutD, int AlignD, class Fusion,
          bool ChunkSums = false>
struct Sm90Gemm {
  using CollectiveEpilogue = typename WithStoreStages<
      Config::store_stages,
      typename cutlass::epilogue::collective::CollectiveBuilder<
          cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, typename Config::Tile, typename Config::Cluster,
          typename Config::EpilogueTile, float, float, void, LayoutD, AlignD, ElementD, LayoutD, AlignD,
          typename Config::Epilogue, Fusion>::CollectiveOp>::type;
  using RegularMainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, bf16, LayoutA, 8, bf16, LayoutB, 8, float,
      typename Config::Tile, typename Config::Cluster,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(
          sizeof(typename CollectiveEpilogue::SharedStorage))>,
      typename Config::Mainloop>::CollectiveOp;
  using CollectiveMainloop = cute::conditional_t<ChunkSums, ChunkSummed<RegularMainloop>, RegularMainloop>;
  using Kernel = cutlass::gemm::kernel::GemmUniversal<Shape<int, int, int, int>, CollectiveMainloop,
                                                      CollectiveEpilogue, cutlass::gemm::PersistentScheduler>;
  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;
  static constexpr bool pdl = ADALN_PDL;  // launch with programmatic stream serialization (pdl.cuh)
  using StrideA = typename Gemm::GemmKernel::StrideA;
  using StrideB = typename Gemm::GemmKernel::StrideB;
  using StrideD = typename Gemm::GemmKernel::StrideD;
  using Arguments = typename Gemm::Arguments;

  // D = Fusion(alpha * A.B) with alpha = 1 and beta = 0 (no C), on sm_count SMs, batched over `l` when
  // `mode` says so; the caller adds what its fusion or schedule needs.
  static Arguments arguments(cutlass::gemm::GemmUniversalMode mode, int64_t m, int64_t n, int64_t k, int64_t l,
                             const void* A, StrideA sa, const void* B, StrideB sb, void* D, StrideD sd,
                             int sm_count) {
    Arguments args{mode,
                   {int(m), int(n), int(k), int(l)},
                   {static_cast<const bf16*>(A), sa, static_cast<const bf16*>(B), sb},
                   {{}, nullptr, sd, static_cast<ElementD*>(D), sd}};
    args.epilogue.thread.alpha = 1.0f;
    args.epilogue.thread.beta = 0.0f;
    args.hw_info.sm_count = sm_count;
    return args;
  }
};

// The largest power-of-two tile-order swizzle, at most `max_swizzle`, that adds no tile to an m x n GEMM with
// this configuration. CUTLASS's persistent scheduler rounds the grid of tiles up to a multiple of swizzle x
// cluster along each mode, and a padded tile runs its whole mainloop on zero-filled loads (only its stores are
// predicated off): a swizzle of 2 turned 5 token tiles in 1x2 clusters into 8 (git:NOTES.md "v13 run 33").
template <class Config>
int padless_swizzle(int64_t m, int64_t n, int max_swizzle) {
  using Tile = typename Config::Tile;
  using Cluster = typename Config::Cluster;
  auto clusters = [](int64_t extent, int64_t tile, int64_t cluster) {
    return ((extent + tile - 1) / tile + cluster - 1) / cluster;
  };
  const int64_t cm = clusters(m, size<0>(Tile{}), size<0>(Cluster{}));
  const int64_t cn = clusters(n, size<1>(Tile{}), size<1>(Cluster{}));
  int swizzle = max_swizzle;
  while (swizzle > 1 && (cm % swizzle != 0 || cn % swizzle != 0)) swizzle /= 2;
  return swizzle;
}

// Whether this configuration's clusters round the count of token tiles (its N mode, n long) up: the padded tile
// column runs its mainloop on zero-filled loads. The forward and d_act then take their odd-count configuration.
template <class Config>
bool clusters_pad_token_tiles(int64_t n) {
  constexpr int64_t tile = size<1>(typename Config::Tile{}), cluster = size<1>(typename Config::Cluster{});
  return (n + tile - 1) / tile % cluster != 0;
}

// Token-side tiers of the forward and d_act GEMMs (sm90_config.h): `Tier<MaxT, Config>` takes T (or the T
// block) <= MaxT (MaxT = 0: the tier is off and not compiled); the first tier that holds wins, and above them
// all the GEMM's `Large` configuration. `Launch<Config>::run(args...)` is called. The bounds depend on T only,
// and every tile gives the same bits (checked on the H200: docs/kernels.md).
template <int MaxT, class Config>
struct Tier {
  static constexpr int max_t = MaxT;
  using type = Config;
};

template <template <class> class Launch, class Large, class... Tiers>
struct TokenTiers {
  template <class... Args>
  static int run(int64_t, Args... args) {
    return Launch<Large>::run(args...);
  }
};
template <template <class> class Launch, class Large, class First, class... More>
struct TokenTiers<Launch, Large, First, More...> {
  template <class... Args>
  static int run(int64_t t, Args... args) {
    if constexpr (First::max_t > 0) {
      if (t <= First::max_t) return Launch<typename First::type>::run(args...);
    }
    return TokenTiers<Launch, Large, More...>::run(t, args...);
  }
};

}  // namespace adaln
