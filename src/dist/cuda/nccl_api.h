// The NCCL functions of the NCCL engine (nccl_communicator.cpp), bound at run time from
// libnccl.so.2 (kernels/dynamic_library.h): no gdn binary links NCCL, so a machine without it
// trains everything but multi-GPU runs, which are refused naming the library (nccl_communicator.h).
#pragma once
#include <nccl.h>

#include "kernels/dynamic_library.h"

namespace gdn::dist {

// Every NCCL function of nccl_communicator.cpp.
#define GDN_NCCL_FUNCTIONS(X) \
  X(ncclGetVersion)           \
  X(ncclGetErrorString)       \
  X(ncclGetLastError)         \
  X(ncclGetUniqueId)          \
  X(ncclCommInitRankConfig)   \
  X(ncclCommGetAsyncError)    \
  X(ncclCommFinalize)         \
  X(ncclCommDestroy)          \
  X(ncclCommAbort)            \
  X(ncclAllReduce)            \
  X(ncclBroadcast)            \
  X(ncclAllGather)            \
  X(ncclReduceScatter)

// Pointers named as the functions: `nccl().ncclAllReduce(...)`.
struct NcclApi {
#define GDN_NCCL_POINTER(fn) decltype(&::fn) fn = nullptr;
  GDN_NCCL_FUNCTIONS(GDN_NCCL_POINTER)
#undef GDN_NCCL_POINTER
};

// The process's NCCL, opened on first use; null when nccl_info() (nccl_communicator.h) says it
// is not available.
const NcclApi* nccl_api_or_null();

}  // namespace gdn::dist
