// Rotary position embedding on CUDA (kernels/cuda/rope.cu): the CPU kernel's semantics
// (kernels/cpu/rope.h: rotate-half, positions offset + t - sequence start). A plain C++ header.
// Packed sequences read cu_seqlens from device memory: the caller passes a workspace of
// cuda_workspace_bytes(p) bytes (0 unpacked) that the call fills on `stream` (kernels never
// allocate).
#pragma once
#include <cstdint>

#include "kernels/cpu/rope.h"

namespace gdn::rope {

int64_t cuda_workspace_bytes(const Problem& p);

// y = R(+a) x (inverse = false) or R(-a) x; x and y may be the same buffer. T is float, double or
// bf16 (math in acc_t<T>). `stream` is a cudaStream_t.
template <typename T>
void apply_cuda(const Problem& p, const T* x, T* y, bool inverse, void* workspace, void* stream);

}  // namespace gdn::rope
