// Internal helpers of the CPU Kimi Delta Attention kernels (kda_*.cpp) and their entry points:
// argument checks, the time-major offsets of kernels/kda.h, and the slice loop, which is the
// gated delta rule's (kernels/cpu/gdr_internal.h) over kda::Problem::as_gdr().
#pragma once
#include <cstdint>
#include <initializer_list>
#include <string>

#include "kernels/cpu/gdr_internal.h"
#include "kernels/kda.h"

namespace gdn::kda::detail {

using gdr::detail::Carver;
using gdr::detail::copy_or_zero;
using gdr::detail::Slice;

// A pointer the implementation reads or writes, when `needed`.
struct Required {
  const void* ptr;
  const char* what;
  bool needed = true;
};
// Throws std::invalid_argument naming the first needed pointer that is null.
void require(std::initializer_list<Required> pointers, const Problem& p, const char* device);

template <typename T>
void check_inputs(const Problem& p, const Inputs<T>& in, const char* device) {
  validate(p);
  require({{in.q, "q"},
           {in.k, "k"},
           {in.v, "v"},
           {in.g, "g"},
           {in.beta, "beta"},
           {in.h0, "h0 (has_h0 is set)", p.has_h0}},
          p, device);
}

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
           {args.dbeta, "dbeta"},
           {args.dh0, "dh0 (has_h0 is set)", p.has_h0}},
          p, device);
  if (args.dht && !p.want_ht) require({{nullptr, "want_ht (dht is given)"}}, p, device);
}

// Offsets at token `tok` of the B * T (flattened) tokens.
inline int64_t qk_offset(const Problem& p, int64_t tok, int64_t h) {
  return (tok * p.H + h) * p.K;
}
inline int64_t vo_offset(const Problem& p, int64_t tok, int64_t hv) {
  return (tok * p.HV + hv) * p.V;
}
inline int64_t g_offset(const Problem& p, int64_t tok, int64_t hv) {
  return (tok * p.HV + hv) * p.K;
}
inline int64_t beta_offset(const Problem& p, int64_t tok, int64_t hv) {
  return tok * p.HV + hv;
}

// Runs body(slice, w) over the value slices (sequence, value head) (forward) or the key slices
// (sequence, key head) (backward) in parallel, each sequence chunked from its own first token;
// Scratch(one, base, backward) carves a slice's scratch (one: a Problem of the longest sequence).
template <class Scratch, typename A, class Body>
void for_each_slice(const Problem& p, bool backward, A* ws, const Body& body) {
  const gdr::Problem g = p.as_gdr();
  gdr::detail::for_each_slice<Scratch>(g, gdr::sequences(g), backward, ws, body);
}

// Workspace of an implementation whose slices carve Scratch: one set per slice, up to the cap.
template <class Scratch>
int64_t slices_workspace(const Problem& p, bool backward) {
  const gdr::Problem g = p.as_gdr();
  const gdr::Sequences s = gdr::sequences(g);
  const int64_t slices = s.count() * (backward ? p.H : p.HV);
  return gdr::detail::scratch_sets(slices) *
         Scratch(gdr::detail::slice_problem(g, s), nullptr, backward).used;
}

#define GDN_KDA_DECLARE(name)                                                               \
  int64_t name##_forward_workspace(const Problem& p);                                       \
  int64_t name##_backward_workspace(const Problem& p);                                      \
  template <typename T>                                                                     \
  void name##_forward(const Problem& p, const Inputs<T>& in, const ForwardOutputs<T>& out); \
  template <typename T>                                                                     \
  void name##_backward(const Problem& p, const Inputs<T>& in, const BackwardArgs<T>& args);
GDN_KDA_DECLARE(recurrent)
GDN_KDA_DECLARE(chunked)
#undef GDN_KDA_DECLARE

// Defines an implementation's entry points from its Scratch<A> and its forward_slice(p, in, out,
// s, w) (value slice) and backward_slice(p, in, args, kh, w) (key slice, its group's value heads
// in order so that the dq, dk sums are deterministic).
#define GDN_KDA_DEFINE_BY_SLICES(name, Scratch)                                              \
  int64_t name##_forward_workspace(const Problem& p) {                                       \
    return slices_workspace<Scratch<float>>(p, false);                                       \
  }                                                                                          \
  int64_t name##_backward_workspace(const Problem& p) {                                      \
    return slices_workspace<Scratch<float>>(p, true);                                        \
  }                                                                                          \
  template <typename T>                                                                      \
  void name##_forward(const Problem& p, const Inputs<T>& in, const ForwardOutputs<T>& out) { \
    for_each_slice<Scratch<acc_t<T>>>(                                                       \
        p, false, out.workspace,                                                             \
        [&](const Slice& s, const auto& w) { forward_slice(p, in, out, s, w); });            \
  }                                                                                          \
  template <typename T>                                                                      \
  void name##_backward(const Problem& p, const Inputs<T>& in, const BackwardArgs<T>& args) { \
    for_each_slice<Scratch<acc_t<T>>>(                                                       \
        p, true, args.workspace,                                                             \
        [&](const Slice& kh, const auto& w) { backward_slice(p, in, args, kh, w); });        \
  }                                                                                          \
  GDN_KDA_INSTANTIATE(name)

#define GDN_KDA_INSTANTIATE(name)                                              \
  template void name##_forward<float>(const Problem&, const Inputs<float>&,    \
                                      const ForwardOutputs<float>&);           \
  template void name##_forward<double>(const Problem&, const Inputs<double>&,  \
                                       const ForwardOutputs<double>&);         \
  template void name##_forward<bf16>(const Problem&, const Inputs<bf16>&,      \
                                     const ForwardOutputs<bf16>&);             \
  template void name##_backward<float>(const Problem&, const Inputs<float>&,   \
                                       const BackwardArgs<float>&);            \
  template void name##_backward<double>(const Problem&, const Inputs<double>&, \
                                        const BackwardArgs<double>&);          \
  template void name##_backward<bf16>(const Problem&, const Inputs<bf16>&,     \
                                      const BackwardArgs<bf16>&);

}  // namespace gdn::kda::detail
