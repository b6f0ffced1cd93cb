// Argument checks shared by the CPU and CUDA dispatchers of the gated delta rule
// (gated_delta_rule.cpp, cuda/gdr_dispatch.cu): every delta-rule family's
// (kernels/delta_rule_checks.h), with the gated delta rule's names. `ssd` reads no beta and
// writes no dbeta.
#pragma once
#include "kernels/delta_rule_checks.h"
#include "kernels/gated_delta_rule.h"

namespace gdn::gdr {

inline delta_rule::Checked check_context(const Problem& p, const char* device) {
  return {"gdr", impl_name(p.impl), device, p.impl != Impl::ssd};
}

namespace detail {
using delta_rule::check_backward_args;
using delta_rule::check_forward_args;
}  // namespace detail

}  // namespace gdn::gdr
