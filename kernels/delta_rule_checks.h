// Argument checks of every delta-rule family's CPU and CUDA entry points (kernels/gdr_checks.h for
// the gated delta rule, kernels/cpu/kda_internal.h for Kimi Delta Attention): the Problem is valid
// and every pointer the implementation will read or write is given. Errors are
// std::invalid_argument ("gdr: ...", "kda: ...") naming the pointer, the implementation and the
// device.
#pragma once
#include <initializer_list>
#include <stdexcept>
#include <string>

#include "kernels/delta_rule_problem.h"

namespace gdn::delta_rule {

// A pointer the implementation reads or writes, when `needed`.
struct Required {
  const void* ptr;
  const char* what;
  bool needed = true;
};

// Who is checked, for the messages: the family ("gdr"), the implementation's name, the device
// ("CPU", "CUDA"); and whether the implementation reads beta (and writes dbeta).
struct Checked {
  const char* family;
  const char* impl;
  const char* device;
  bool beta = true;
};

[[noreturn]] inline void fail_check(const Checked& c, const std::string& what) {
  throw std::invalid_argument(std::string(c.family) + ": " + what + " (impl " + c.impl + ", " +
                              c.device + ")");
}

// Throws naming the first needed pointer that is null.
inline void require(std::initializer_list<Required> pointers, const Checked& c) {
  for (const Required& r : pointers)
    if (r.needed && !r.ptr) fail_check(c, std::string(r.what) + " is null");
}

template <typename T>
void check_inputs(const Sizes& p, const Inputs<T>& in, const Checked& c) {
  require({{in.q, "q"},
           {in.k, "k"},
           {in.v, "v"},
           {in.g, "g"},
           {in.beta, "beta", c.beta},
           {in.h0, "h0 (has_h0 is set)", p.has_h0}},
          c);
}

// The pointers of a forward; `workspace_elems`: what this device's kernels need for p.
template <typename T>
void check_forward_pointers(const Sizes& p, const Inputs<T>& in, const ForwardOutputs<T>& out,
                            int64_t workspace_elems, const Checked& c) {
  check_inputs(p, in, c);
  require({{out.o, "o"},
           {out.ht, "ht (want_ht is set)", p.want_ht},
           {out.residual, "residual"},
           {out.workspace, "forward workspace", workspace_elems > 0}},
          c);
}

template <typename T>
void check_backward_pointers(const Sizes& p, const Inputs<T>& in, const BackwardArgs<T>& args,
                             int64_t workspace_elems, const Checked& c) {
  check_inputs(p, in, c);
  require({{args.d_o, "d_o"},
           {args.residual, "residual"},
           {args.workspace, "backward workspace", workspace_elems > 0},
           {args.dq, "dq"},
           {args.dk, "dk"},
           {args.dv, "dv"},
           {args.dg, "dg"},
           {args.dbeta, "dbeta", c.beta},
           {args.dh0, "dh0 (has_h0 is set)", p.has_h0}},
          c);
  if (args.dht && !p.want_ht) fail_check(c, "dht is given but want_ht is not set");
}

// An entry point's checks: validate(p), then the pointers. The family's namespace provides
// validate(p) and check_context(p, device) (the Checked of p), found by argument-dependent lookup.
template <class Problem, typename T>
void check_forward_args(const Problem& p, const Inputs<T>& in, const ForwardOutputs<T>& out,
                        int64_t workspace_elems, const char* device) {
  validate(p);
  check_forward_pointers(p, in, out, workspace_elems, check_context(p, device));
}

template <class Problem, typename T>
void check_backward_args(const Problem& p, const Inputs<T>& in, const BackwardArgs<T>& args,
                         int64_t workspace_elems, const char* device) {
  validate(p);
  check_backward_pointers(p, in, args, workspace_elems, check_context(p, device));
}

}  // namespace gdn::delta_rule
