// gated_delta_rule(): shape and dtype checks, then the autograd Function of
// src/ops/delta_rule_fn.h over the gated-delta-rule kernels.
#include "src/ops/gated_delta_rule.h"

#include <set>

#include "kernels/gdr_registry.h"
#include "src/ops/delta_rule_fn.h"

namespace gdn::ops {

namespace {

// Kernels that do not take cu_seqlens run a packed Problem a sequence at a time on one
// workspace sized for the largest; that size depends on each sequence's own length alone, so a
// Problem with one sequence of each distinct length needs the same. Sizing it instead keeps
// millions of sequences (a huge batch checked on meta) from costing O(N^2).
gdr::Problem one_sequence_per_length(const gdr::Problem& p, bool split) {
  if (!p.packed() || !split) return p;
  std::set<int64_t> lens;
  for (size_t n = 0; n + 1 < p.cu_seqlens.size(); ++n)
    lens.insert(p.cu_seqlens[n + 1] - p.cu_seqlens[n]);
  gdr::Problem q = p;
  q.cu_seqlens.assign(1, 0);
  for (int64_t len : lens) q.cu_seqlens.push_back(q.cu_seqlens.back() + len);
  q.T = q.cu_seqlens.back();
  return q;
}

// Accumulator elements of scratch the implementation needs on this device for inputs of dtype
// `dt` (the CPU and CUDA kernels keep different scratch; meta sizes the CPU's).
int64_t gdr_workspace_elems(const gdr::Problem& packed, Device dev, DType dt, bool backward) {
  const gdr::Implementation& impl = gdr::implementation_of(packed);
  const int64_t in_bytes = int64_t(dtype_size(dt));
#if defined(GDN_WITH_CUDA)
  if (dev.is_cuda()) {
    detail::stream_of(dev);  // the fused plan reads the current device
    const gdr::Problem p = one_sequence_per_length(packed, !impl.cuda->packed);
    return backward ? impl.cuda_backward_workspace(p, in_bytes)
                    : impl.cuda_forward_workspace(p, in_bytes);
  }
#endif
  (void)dev;
  (void)in_bytes;
  const gdr::Problem p = one_sequence_per_length(packed, !impl.cpu.packed);
  return backward ? impl.cpu_backward_workspace(p) : impl.cpu_forward_workspace(p);
}

// The gated delta rule (and ssd) as a DeltaRuleFn family.
struct GdrFamily
    : detail::DeltaRuleTypes<gdr::Problem, gdr::Inputs, gdr::ForwardOutputs, gdr::BackwardArgs> {
  static constexpr const char* op = "gated_delta_rule";
  static constexpr const char* op_backward = "gated_delta_rule backward";
  static const char* name(const Problem& p) {
    return gdr::implementation_of(p).delta_rule ? "gated_delta_rule" : "ssd";
  }
  static constexpr auto workspace_elems = &gdr_workspace_elems;
};

using GatedDeltaRuleFn = detail::DeltaRuleFn<GdrFamily>;

}  // namespace

gdr::Problem gdr_problem(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g,
                         const Tensor& beta, const GdrOptions& opt, const Tensor& h0) {
  const bool ssd = opt.impl == gdr::Impl::ssd;
  detail::common_device("gated_delta_rule", {q, k, v, g, beta, h0});
  auto shapes = [&] {
    return str_cat("q ", shape_str(q.shape()), ", k ", shape_str(k.shape()), ", v ",
                   shape_str(v.shape()), ", g ", shape_str(g.shape()),
                   beta.defined() ? ", beta " + shape_str(beta.shape()) : std::string());
  };
  GDN_CHECK(q.dim() == 4 && k.shape() == q.shape() && v.dim() == 4 && g.dim() == 3,
            "gated_delta_rule expects q, k [B, T, H, K], v [B, T, HV, V], g [B, T, HV]; got ",
            shapes());
  gdr::Problem p;
  detail::set_sizes(p, q, v);
  GDN_CHECK(v.size(0) == p.B && v.size(1) == p.T && g.shape() == Shape({p.B, p.T, p.HV}),
            "gated_delta_rule: batch/time/head sizes differ: ", shapes());
  GDN_CHECK(ssd || (beta.defined() && beta.shape() == g.shape()),
            "gated_delta_rule: beta must be [B, T, HV] like g; got ", shapes());
  for (const Tensor* t : {&k, &v, &g}) detail::check_same_dtype("gated_delta_rule", q, *t);
  if (!ssd) detail::check_same_dtype("gated_delta_rule", q, beta);
  detail::set_common_options(p, opt, h0);
  if (p.chunk == 0) p.chunk = gdr::auto_chunk(q.device().is_cuda(), p.impl, p.K, p.V);
  p.residual = opt.residual;
  p.fused_vt = opt.fused_vt;
  p.fused_sub = opt.fused_sub;
  detail::check_h0("gated_delta_rule", p, q, h0);
  try {
    gdr::validate(p);
  } catch (const std::invalid_argument& e) {
    GDN_FAIL("gated_delta_rule: ", e.what());
  }
  return p;
}

GdrOutput gated_delta_rule(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g,
                           const Tensor& beta, const GdrOptions& opt, const Tensor& h0) {
  const bool ssd = opt.impl == gdr::Impl::ssd;
  gdr::Problem p = gdr_problem(q, k, v, g, beta, opt, h0);
  auto fn = std::make_shared<GatedDeltaRuleFn>(p);
  std::vector<Tensor> in{contiguous(q),
                         contiguous(k),
                         contiguous(v),
                         contiguous(g),
                         ssd ? Tensor() : contiguous(beta),
                         h0.defined() ? contiguous(h0) : h0};
  auto outs = autograd::apply(fn, in);
  GdrOutput r;
  r.o = outs[0];
  if (p.want_ht) r.ht = outs[1];
  return r;
}

}  // namespace gdn::ops
