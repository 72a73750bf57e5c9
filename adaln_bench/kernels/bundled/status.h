// Status codes of the C interface, with names: 0 is success, anything else comes with a message in `err`.
// Python reads the names through adaln_status_name(); the numbers are part of the ABI.
#pragma once

enum AdalnStatus {
  ADALN_OK = 0,
  ADALN_BAD_ARGUMENT = 1,      // a size, pointer or alignment the kernel does not take
  ADALN_GEMM_UNSUPPORTED = 2,  // CUTLASS can_implement refused the problem
  ADALN_GEMM_WORKSPACE = 3,    // CUTLASS wants more workspace than was given
  ADALN_GEMM_INITIALIZE = 4,   // CUTLASS initialize failed
  ADALN_GEMM_RUN = 5,          // CUTLASS run (or its launch) failed
  ADALN_DEVICE_QUERY = 10,     // cudaSetDevice / device attribute query failed
  ADALN_WRONG_ARCH = 11,       // the library was built for another compute capability
  ADALN_LAUNCH = 12,           // an elementwise kernel failed to launch
  ADALN_NO_CONTEXT = 13,       // no CUDA context could be made current on the calling thread
  ADALN_DESCRIPTOR = 14,       // a TMA descriptor could not be encoded (nothing was launched with it)
  ADALN_PENDING_ERROR = 15,    // a CUDA error was already pending when the call started (nothing launched)
};

static inline const char* adaln_status_text(int status) {
  switch (status) {
    case ADALN_OK: return "ok";
    case ADALN_BAD_ARGUMENT: return "bad_argument";
    case ADALN_GEMM_UNSUPPORTED: return "gemm_unsupported";
    case ADALN_GEMM_WORKSPACE: return "gemm_workspace";
    case ADALN_GEMM_INITIALIZE: return "gemm_initialize";
    case ADALN_GEMM_RUN: return "gemm_run";
    case ADALN_DEVICE_QUERY: return "device_query";
    case ADALN_WRONG_ARCH: return "wrong_arch";
    case ADALN_LAUNCH: return "launch";
    case ADALN_NO_CONTEXT: return "no_context";
    case ADALN_DESCRIPTOR: return "descriptor";
    case ADALN_PENDING_ERROR: return "pending_error";
    default: return "unknown";
  }
}
