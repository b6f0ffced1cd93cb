// Argument checks shared by the CPU and CUDA dispatchers of the gated delta rule
// (gated_delta_rule.cpp, cuda/gdr_dispatch.cu): the Problem is valid and every pointer the
// implementation will read or write is given. Errors are std::invalid_argument naming the
// pointer, the implementation and the device.
#pragma once
#include <stdexcept>
#include <string>

#include "kernels/gated_delta_rule.h"

namespace gdn::gdr::detail {

inline void require(const void* ptr, const char* what, const Problem& p, const char* device) {
  if (!ptr)
    throw std::invalid_argument(std::string("gdr: ") + what + " is null (impl " +
                                impl_name(p.impl) + ", " + device + ")");
}

template <typename T>
void check_inputs(const Problem& p, const Inputs<T>& in, const char* device) {
  validate(p);
  require(in.q, "q", p, device);
  require(in.k, "k", p, device);
  require(in.v, "v", p, device);
  require(in.g, "g", p, device);
  if (p.impl != Impl::ssd) require(in.beta, "beta", p, device);
  if (p.has_h0) require(in.h0, "h0 (has_h0 is set)", p, device);
}

// `workspace_elems`: what this device's kernels need for p.
template <typename T>
void check_forward_args(const Problem& p, const Inputs<T>& in, const ForwardOutputs<T>& out,
                        int64_t workspace_elems, const char* device) {
  check_inputs(p, in, device);
  require(out.o, "o", p, device);
  if (p.want_ht) require(out.ht, "ht (want_ht is set)", p, device);
  require(out.residual, "residual", p, device);
  if (workspace_elems > 0) require(out.workspace, "forward workspace", p, device);
}

template <typename T>
void check_backward_args(const Problem& p, const Inputs<T>& in, const BackwardArgs<T>& args,
                         int64_t workspace_elems, const char* device) {
  check_inputs(p, in, device);
  require(args.d_o, "d_o", p, device);
  require(args.residual, "residual", p, device);
  if (workspace_elems > 0) require(args.workspace, "backward workspace", p, device);
  require(args.dq, "dq", p, device);
  require(args.dk, "dk", p, device);
  require(args.dv, "dv", p, device);
  require(args.dg, "dg", p, device);
  if (p.impl != Impl::ssd) require(args.dbeta, "dbeta", p, device);
  if (p.has_h0) require(args.dh0, "dh0 (has_h0 is set)", p, device);
}

}  // namespace gdn::gdr::detail
