// CUTLASS 3.x Hopper (sm_90a) building blocks: TMA + wgmma, warp-specialized cooperative persistent kernels.
// One tile configuration per GEMM, used for every T (see sm90_config.h).
#pragma once
#include "cute/tensor.hpp"
#include "cutlass/cutlass.h"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/epilogue/fusion/operations.hpp"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/gemm/device/gemm_universal_adapter.h"
#include "cutlass/gemm/dispatch_policy.hpp"
#include "cutlass/gemm/kernel/gemm_universal.hpp"
#include "cutlass/gemm/kernel/tile_scheduler.hpp"
#include "gemms.h"
#include "sm90_config.h"

namespace adaln {
using namespace cute;
using bf16 = cutlass::bfloat16_t;
using ClusterShape = Shape<_1, _1, _1>;
using MainloopSchedule = cutlass::gemm::KernelTmaWarpSpecializedCooperative;
using EpilogueSchedule = cutlass::epilogue::TmaWarpSpecializedCooperative;

template <class Gemm>
int run_gemm(typename Gemm::Arguments& args, void* ws, size_t ws_bytes, cudaStream_t stream, Err err,
             const char* what) {
  Gemm gemm;
  cutlass::Status st = gemm.can_implement(args);
  if (st != cutlass::Status::kSuccess) {
    set_err(err, "%s: CUTLASS can_implement failed: %s", what, cutlassGetStatusString(st));
    return 2;
  }
  size_t need = Gemm::get_workspace_size(args);
  if (need > ws_bytes) {
    set_err(err, "%s: CUTLASS workspace %zu bytes > %zu provided", what, need, ws_bytes);
    return 3;
  }
  st = gemm.initialize(args, ws, stream);
  if (st != cutlass::Status::kSuccess) {
    set_err(err, "%s: CUTLASS initialize failed: %s (%s)", what, cutlassGetStatusString(st),
            cudaGetErrorString(cudaGetLastError()));
    return 4;
  }
  st = gemm.run(stream);
  cudaError_t ce = cudaGetLastError();
  if (st != cutlass::Status::kSuccess || ce != cudaSuccess) {
    set_err(err, "%s: CUTLASS run failed: %s / %s", what, cutlassGetStatusString(st), cudaGetErrorString(ce));
    return 5;
  }
  return 0;
}
}  // namespace adaln
