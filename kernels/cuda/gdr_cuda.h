// The gated delta rule on CUDA: which kernels run for a Problem, and the workspace they need.
// A plain C++ header (no CUDA), for the op that allocates the buffers and for tests.
//
// `recurrent`, `chunked` and `ssd` have CUDA kernels with the residual layout and size of their
// CPU counterparts (residual_elems: the chunk-start states, then A and [W | U] for chunked/full),
// so a residual is the same on every device. `fused` has its own kernels (gdr_fused.cu, residual:
// the chunk-start states) where its plan fits the current device (kernels/cuda/gdr_fused_plan.h:
// K and V multiples of 16, the shared memory of one V tile); elsewhere it runs the chunked
// kernels with the `minimal` residual, which is the same residual, so a forward and a backward
// may even take different paths. Workspaces are the CUDA kernels' own (the CPU and CUDA kernels
// keep different scratch): size them with the functions below, in accumulator elements, for the
// bytes of an input element (2 bf16, 4 fp32, 8 fp64: the fused kernels keep keys in the input
// type, so bf16 may fit a plan that fp32 does not).
#pragma once
#include <cstdint>
#include <string>

#include "kernels/cuda/gdr_fused_plan.h"
#include "kernels/gated_delta_rule.h"

namespace gdn::gdr {

// The Problem the CUDA kernels run for `p` on the current device (fused -> chunked with the
// minimal residual where the fused plan does not fit).
Problem cuda_problem(const Problem& p, bool backward, int64_t in_bytes);
// Why `fused` runs as chunked on the current device for this direction; empty when it runs.
std::string cuda_fused_fallback(const Problem& p, bool backward, int64_t in_bytes);
// The fused kernels' plan on the current device (Problem::fused_vt = 16|32|64 forces the V tile,
// Problem::fused_sub = 16|32|64 the kernels' chunk).
fused::Plan cuda_fused_plan(const Problem& p, bool backward, int64_t in_bytes);

// Acc elements of workspace forward_cuda / backward_cuda need for `p` (defined with the CUDA
// kernels, kernels/cuda/gdr_dispatch.cu).
int64_t cuda_forward_workspace_elems(const Problem& p, int64_t in_bytes);
int64_t cuda_backward_workspace_elems(const Problem& p, int64_t in_bytes);

}  // namespace gdn::gdr
