// CUTLASS 3.x Hopper (sm_90a) building blocks: TMA + wgmma, warp-specialized cooperative persistent kernels.
// One tile configuration per GEMM, used for every T (see sm90_config.h).
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
using ClusterShape = Shape<_1, _1, _1>;
using MainloopSchedule = cutlass::gemm::KernelTmaWarpSpecializedCooperative;
using EpilogueSchedule = cutlass::epilogue::TmaWarpSpecializedCooperative;

}  // namespace adaln
