// Internal helpers shared by the op implementations: device checks, the CUDA stream of a
// tensor, and the macro that routes a kernel call to the tensor's device.
#pragma once
#include <vector>

#include "kernels/trace_events.h"
#include "src/core/tensor.h"

#if defined(GDN_WITH_CUDA)
#include "src/core/cuda/cuda_context.h"
#endif

namespace gdn::ops::detail {

// All defined tensors on one device; returns it. Names the op and both devices otherwise.
Device common_device(const char* op, const std::vector<Tensor>& ts);
void check_floating(const char* op, const Tensor& t);
void check_same_dtype(const char* op, const Tensor& a, const Tensor& b);
// The stream of a CUDA device, which it also makes current (kernels launch on the current
// device; library handles are cached per current device).
inline void* stream_of(Device d) {
#if defined(GDN_WITH_CUDA)
  if (!d.is_cuda()) return nullptr;
  cuda::set_device(d.index);
  return cuda::current_stream(d.index);
#else
  (void)d;
  return nullptr;
#endif
}

}  // namespace gdn::ops::detail

// RUN_ON_DEVICE(dev, "op", cpu_call, cuda_call): meta runs nothing. The call is a span of the
// trace (kernels/trace_events.h) named by the op.
#if defined(GDN_WITH_CUDA)
#define GDN_CUDA_BRANCH_(OP, ...) __VA_ARGS__
#else
#define GDN_CUDA_BRANCH_(OP, ...) GDN_FAIL(OP, ": gdn was built without CUDA")
#endif
#define GDN_RUN_ON_DEVICE(DEV, OP, CPU_CALL, CUDA_CALL) \
  do {                                                  \
    ::gdn::trace::Span gdn_op_span_("kernel", OP);      \
    if ((DEV).is_cpu()) {                               \
      CPU_CALL;                                         \
    } else if ((DEV).is_cuda()) {                       \
      GDN_CUDA_BRANCH_(OP, CUDA_CALL);                  \
    }                                                   \
  } while (0)

// For ops whose CUDA kernels come with the CUDA backend issue: a clear error on cuda.
#define GDN_CPU_ONLY_YET(DEV, OP) \
  GDN_CHECK(!(DEV).is_cuda(), OP, " has no CUDA kernel yet (CPU and meta only in this build)")
