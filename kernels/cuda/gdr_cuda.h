// The gated delta rule on CUDA: which kernels run for a Problem, and the workspace they need.
// A plain C++ header (no CUDA), for the op that allocates the buffers and for tests.
//
// `recurrent`, `chunked` and `ssd` have CUDA kernels with the residual layout and size of their
// CPU counterparts (residual_elems: the chunk-start states, then A and [W | U] for chunked/full),
// so a residual is the same on every device. Workspaces are the CUDA kernels' own (the CPU and
// CUDA kernels keep different scratch): size them with the functions below. `fused` has no CUDA
// kernel yet (a later issue): on CUDA it runs as `chunked` with the `minimal` residual (the same
// residual size: the chunk-start states).
#pragma once
#include <cstdint>

#include "kernels/gated_delta_rule.h"

namespace gdn::gdr {

// The Problem the CUDA kernels run for `p` (fused -> chunked, minimal residual).
inline Problem cuda_problem(const Problem& p) {
  Problem c = p;
  if (c.impl == Impl::fused) {
    c.impl = Impl::chunked;
    c.residual = Residual::minimal;
  }
  return c;
}

// Acc elements of workspace forward_cuda / backward_cuda need for `p` (defined with the CUDA
// kernels, kernels/cuda/gdr_dispatch.cu).
int64_t cuda_forward_workspace_elems(const Problem& p);
int64_t cuda_backward_workspace_elems(const Problem& p);

}  // namespace gdn::gdr
