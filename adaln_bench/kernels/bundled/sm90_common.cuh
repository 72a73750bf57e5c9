// CUTLASS 3.x Hopper (sm_90a) building blocks: TMA + wgmma, warp-specialized persistent kernels.
// `Sm90Gemm` is the one place a GEMM of this path is assembled (the forward, d_act and dW files only pick
// operand layouts, output type, epilogue and a tile configuration from sm90_config.h).
#pragma once
#include "tma_guard.cuh"  // first: before any CuTe header (see there)
#include "cute/tensor.hpp"
#include "cutlass/cutlass.h"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/epilogue/fusion/operations.hpp"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/gemm/device/gemm_universal_adapter.h"
#include "cutlass/gemm/dispatch_policy.hpp"
#include "cutlass/gemm/kernel/gemm_universal.hpp"
#include "cutlass/gemm/kernel/tile_scheduler.hpp"
#include "cutlass_run.cuh"
#include "gemms.h"
#include "sm90_config.h"

namespace adaln {
using namespace cute;
using bf16 = cutlass::bfloat16_t;

// A tile configuration: CTA tile (TM x TN x TK), cluster (ClusterM x ClusterN: CTAs of one cluster share the
// operand tile they have in common through TMA multicast), and the kernel schedule. Cooperative: both
// consumer warpgroups share one TM x TN tile (TM >= 128). Pingpong: each consumer warpgroup owns a whole
// TM x TN tile and its epilogue overlaps the other's mainloop (for short-K GEMMs). Neither changes an
// element's accumulation chain: fresh accumulator, k in order, 16 at a time.
template <int TM, int TN, int ClusterM, bool Pingpong, int TK = 64, bool DirectStore = false, int ClusterN = 1>
struct TileConfig {
  using Tile = Shape<Int<TM>, Int<TN>, Int<TK>>;
  using Cluster = Shape<Int<ClusterM>, Int<ClusterN>, _1>;
  using Mainloop = cute::conditional_t<Pingpong, cutlass::gemm::KernelTmaWarpSpecializedPingpong,
                                       cutlass::gemm::KernelTmaWarpSpecializedCooperative>;
  // DirectStore: registers straight to global memory (no smem staging, no TMA store), for a write-bound GEMM.
  using Epilogue = cute::conditional_t<
      DirectStore, cutlass::epilogue::NoSmemWarpSpecialized,
      cute::conditional_t<Pingpong, cutlass::epilogue::TmaWarpSpecialized,
                          cutlass::epilogue::TmaWarpSpecializedCooperative>>;
};

// One bf16 x bf16 -> fp32-accumulated GEMM with no C operand (ElementC = void): D = Fusion(acc).
template <class Config, class LayoutA, class LayoutB, class ElementD, class LayoutD, int AlignD, class Fusion>
struct Sm90Gemm {
  using CollectiveEpilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, typename Config::Tile, typename Config::Cluster,
      cutlass::epilogue::collective::EpilogueTileAuto, float, float, void, LayoutD, AlignD, ElementD, LayoutD, AlignD,
      typename Config::Epilogue, Fusion>::CollectiveOp;
  using CollectiveMainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, bf16, LayoutA, 8, bf16, LayoutB, 8, float,
      typename Config::Tile, typename Config::Cluster,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(
          sizeof(typename CollectiveEpilogue::SharedStorage))>,
      typename Config::Mainloop>::CollectiveOp;
  using Kernel = cutlass::gemm::kernel::GemmUniversal<Shape<int, int, int, int>, CollectiveMainloop,
                                                      CollectiveEpilogue, cutlass::gemm::PersistentScheduler>;
  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;
  using StrideA = typename Gemm::GemmKernel::StrideA;
  using StrideB = typename Gemm::GemmKernel::StrideB;
  using StrideD = typename Gemm::GemmKernel::StrideD;
};

// The token-side tiers of the forward and d_act GEMMs (sm90_config.h): the first tier whose bound holds;
// above the last bound, the GEMM's own large-T configuration `Large`. `Launch<Config>::run` is called. The
// bounds depend on T (or the T block) only, and every tier gives the same bits (checked on the H200: NOTES.md).
template <template <class> class Launch, class Large, class... Args>
int dispatch_token_tiers(int64_t t, Args... args) {
#if ADALN_TIER0_MAX > 0
  if (t <= ADALN_TIER0_MAX)
    return Launch<TileConfig<ADALN_TIER0_TM, ADALN_TIER0_TN, 1, ADALN_TIER0_PINGPONG, ADALN_TIER0_TK>>::run(args...);
#endif
#if ADALN_TIER1_MAX > 0
  if (t <= ADALN_TIER1_MAX)
    return Launch<TileConfig<ADALN_TIER1_TM, ADALN_TIER1_TN, 1, ADALN_TIER1_PINGPONG, ADALN_TIER1_TK>>::run(args...);
#endif
#if ADALN_TIER2_MAX > 0
  if (t <= ADALN_TIER2_MAX) return Launch<TileConfig<128, ADALN_TIER2_TN, 1, false>>::run(args...);
#endif
  return Launch<Large>::run(args...);
}

}  // namespace adaln
