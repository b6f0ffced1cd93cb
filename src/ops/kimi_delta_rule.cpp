// kimi_delta_rule(): shape and dtype checks, then the autograd Function of
// src/ops/delta_rule_fn.h over the KDA kernels.
#include "src/ops/kimi_delta_rule.h"

#include "src/ops/delta_rule_fn.h"

namespace gdn::ops {

namespace {

// Accumulator elements of scratch p's implementation needs on this device (meta sizes the CPU's).
int64_t kda_workspace_elems(const kda::Problem& p, Device dev, DType dt, bool backward) {
  const kda::Implementation& impl = kda::implementation_of(p);
#if defined(GDN_WITH_CUDA)
  if (dev.is_cuda()) {
    const int64_t in_bytes = int64_t(dtype_size(dt));
    return backward ? impl.cuda_backward_workspace(p, in_bytes)
                    : impl.cuda_forward_workspace(p, in_bytes);
  }
#endif
  (void)dev;
  (void)dt;
  return backward ? impl.cpu_backward_workspace(p) : impl.cpu_forward_workspace(p);
}

// Kimi Delta Attention as a DeltaRuleFn family.
struct KdaFamily
    : detail::DeltaRuleTypes<kda::Problem, kda::Inputs, kda::ForwardOutputs, kda::BackwardArgs> {
  static constexpr const char* op = "kimi_delta_rule";
  static constexpr const char* op_backward = "kimi_delta_rule backward";
  static const char* name(const Problem&) { return "kimi_delta_rule"; }
  static constexpr auto workspace_elems = &kda_workspace_elems;
};

using KimiDeltaRuleFn = detail::DeltaRuleFn<KdaFamily>;

}  // namespace

kda::Problem kda_problem(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g,
                         const Tensor& beta, const KdaOptions& opt, const Tensor& h0) {
  detail::common_device("kimi_delta_rule", {q, k, v, g, beta, h0});
  auto shapes = [&] {
    return str_cat("q ", shape_str(q.shape()), ", k ", shape_str(k.shape()), ", v ",
                   shape_str(v.shape()), ", g ", shape_str(g.shape()), ", beta ",
                   beta.defined() ? shape_str(beta.shape()) : std::string("undefined"));
  };
  GDN_CHECK(q.dim() == 4 && k.shape() == q.shape() && v.dim() == 4 && g.dim() == 4 &&
                beta.defined() && beta.dim() == 3,
            "kimi_delta_rule expects q, k [B, T, H, K], v [B, T, HV, V], g [B, T, HV, K], "
            "beta [B, T, HV]; got ",
            shapes());
  kda::Problem p;
  detail::set_sizes(p, q, v);
  GDN_CHECK(v.size(0) == p.B && v.size(1) == p.T && g.shape() == Shape({p.B, p.T, p.HV, p.K}) &&
                beta.shape() == Shape({p.B, p.T, p.HV}),
            "kimi_delta_rule: sizes differ (g must be [B, T, HV, K], beta [B, T, HV]): ", shapes());
  for (const Tensor* t : {&k, &v, &g, &beta}) detail::check_same_dtype("kimi_delta_rule", q, *t);
  detail::set_common_options(p, opt, h0);
  if (p.chunk == 0) p.chunk = kda::kAutoChunk;
  detail::check_h0("kimi_delta_rule", p, q, h0);
  try {
    kda::validate(p);
  } catch (const std::invalid_argument& e) {
    GDN_FAIL("kimi_delta_rule: ", e.what(), " (", shapes(), ")");
  }
  return p;
}

KdaOutput kimi_delta_rule(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g,
                          const Tensor& beta, const KdaOptions& opt, const Tensor& h0) {
  kda::Problem p = kda_problem(q, k, v, g, beta, opt, h0);
  const bool want_ht = p.want_ht;
  auto fn = std::make_shared<KimiDeltaRuleFn>(std::move(p));
  std::vector<Tensor> in{contiguous(q), contiguous(k),    contiguous(v),
                         contiguous(g), contiguous(beta), h0.defined() ? contiguous(h0) : h0};
  auto outs = autograd::apply(fn, in);
  KdaOutput r;
  r.o = outs[0];
  if (want_ht) r.ht = outs[1];
  return r;
}

}  // namespace gdn::ops
