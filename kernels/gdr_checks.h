// Argument checks shared by the CPU and CUDA dispatchers of the gated delta rule
// (gated_delta_rule.cpp, cuda/gdr_dispatch.cu): the Problem is valid and every pointer the
// implementation will read or write is given. Errors are std::invalid_argument naming the
// pointer, the implementation and the device.
#pragma once
#include <initializer_list>
#include <stdexcept>
#include <string>

#include "kernels/gated_delta_rule.h"

namespace gdn::gdr::detail {

// A pointer the implementation reads or writes, when `needed`.
struct Required {
  const void* ptr;
  const char* what;
  bool needed = true;
};

inline void require(std::initializer_list<Required> pointers, const Problem& p,
                    const char* device) {
  for (const Required& r : pointers)
    if (r.needed && !r.ptr)
      throw std::invalid_argument(std::string("gdr: ") + r.what + " is null (impl " +
                                  impl_name(p.impl) + ", " + device + ")");
}

template <typename T>
void check_inputs(const Problem& p, const Inputs<T>& in, const char* device) {
  validate(p);
  require({{in.q, "q"},
           {in.k, "k"},
           {in.v, "v"},
           {in.g, "g"},
           {in.beta, "beta", p.impl != Impl::ssd},
           {in.h0, "h0 (has_h0 is set)", p.has_h0}},
          p, device);
}

// `workspace_elems`: what this device's kernels need for p.
template <typename T>
void check_forward_args(const Problem& p, const Inputs<T>& in, const ForwardOutputs<T>& out,
                        int64_t workspace_elems, const char* device) {
  check_inputs(p, in, device);
  require({{out.o, "o"},
           {out.ht, "ht (want_ht is set)", p.want_ht},
           {out.residual, "residual"},
           {out.workspace, "forward workspace", workspace_elems > 0}},
          p, device);
}

template <typename T>
void check_backward_args(const Problem& p, const Inputs<T>& in, const BackwardArgs<T>& args,
                         int64_t workspace_elems, const char* device) {
  check_inputs(p, in, device);
  require({{args.d_o, "d_o"},
           {args.residual, "residual"},
           {args.workspace, "backward workspace", workspace_elems > 0},
           {args.dq, "dq"},
           {args.dk, "dk"},
           {args.dv, "dv"},
           {args.dg, "dg"},
           {args.dbeta, "dbeta", p.impl != Impl::ssd},
           {args.dh0, "dh0 (has_h0 is set)", p.has_h0}},
          p, device);
  if (args.dht && !p.want_ht)
    throw std::invalid_argument(std::string("gdr: dht is given but want_ht is not set (impl ") +
                                impl_name(p.impl) + ", " + device + ")");
}

}  // namespace gdn::gdr::detail
