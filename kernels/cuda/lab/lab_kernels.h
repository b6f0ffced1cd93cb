// The kernel lab's `lab` variant (lab_block.cuh through the library's launch path), as plain
// functions the host-only gdr_lab.cpp calls. Same contract as gdr::forward_cuda / backward_cuda
// for Impl::fused (residual: the chunk-start states; backward workspace: the fused partials).
#pragma once
#include "kernels/gated_delta_rule.h"

namespace gdn::gdr::lab {

template <typename T>
void lab_forward(const Problem& p, const Inputs<T>& in, const ForwardOutputs<T>& out, void* stream);
template <typename T>
void lab_backward(const Problem& p, const Inputs<T>& in, const BackwardArgs<T>& args, void* stream);

}  // namespace gdn::gdr::lab
