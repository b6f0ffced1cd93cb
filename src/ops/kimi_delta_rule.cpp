// kimi_delta_rule(): shape and dtype checks, allocation of outputs, the residual (saved for
// backward, tagged activation by autograd) and workspaces (tagged workspace, freed after each
// call), then the kernel for the device. On meta only the allocations happen.
#include "src/ops/kimi_delta_rule.h"

#include <cmath>

#include "src/autograd/function.h"
#include "src/ops/dispatch.h"
#include "src/ops/kernel_scratch.h"
#include "src/ops/ops.h"

namespace gdn::ops {

namespace {

using detail::acc_dtype;
using detail::workspace;

// Accumulator elements of scratch p's implementation needs on this device (meta sizes the CPU's).
int64_t workspace_elems(const kda::Problem& p, Device dev, DType dt, bool backward) {
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

template <typename T>
T* ptr(const Tensor& t) {
  return t.defined() ? t.data<T>() : nullptr;
}

template <typename T>
kda::Inputs<T> inputs_of(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g,
                         const Tensor& beta, const Tensor& h0) {
  return {ptr<T>(q), ptr<T>(k), ptr<T>(v), ptr<T>(g), ptr<T>(beta), ptr<acc_t<T>>(h0)};
}

class KimiDeltaRuleFn final : public autograd::Function {
 public:
  explicit KimiDeltaRuleFn(kda::Problem p) : p_(std::move(p)) {}
  const char* name() const override { return "kimi_delta_rule"; }

  // inputs: q, k, v, g, beta, h0 (may be undefined)
  std::vector<Tensor> forward(autograd::FunctionCtx& ctx, const std::vector<Tensor>& in) override {
    const Tensor &q = in[0], &k = in[1], &v = in[2], &g = in[3], &beta = in[4], &h0 = in[5];
    const Device dev = q.device();
    const DType ad = acc_dtype(q.dtype());
    Tensor o = empty({p_.B, p_.T, p_.HV, p_.V}, q.dtype(), dev);
    Tensor ht = p_.want_ht ? empty({p_.num_seqs(), p_.HV, p_.K, p_.V}, ad, dev) : Tensor();
    Tensor residual = empty({kda::residual_elems(p_)}, ad, dev);
    {
      Tensor ws = workspace(workspace_elems(p_, dev, q.dtype(), false), ad, dev);
      if (!dev.is_meta()) {
        dispatch_dtype<KernelTypes>(q.dtype(), "kimi_delta_rule", [&](auto tag) {
          using scalar_t = typename decltype(tag)::type;
          using A = acc_t<scalar_t>;
          const auto args = inputs_of<scalar_t>(q, k, v, g, beta, h0);
          const kda::ForwardOutputs<scalar_t> outs{ptr<scalar_t>(o), ptr<A>(ht), ptr<A>(residual),
                                                   ptr<A>(ws)};
          GDN_RUN_ON_DEVICE(dev, "kimi_delta_rule", kda::forward_cpu<scalar_t>(p_, args, outs),
                            kda::forward_cuda<scalar_t>(p_, args, outs, detail::stream_of(dev)));
        });
      }
    }
    ctx.save_for_backward({q, k, v, g, beta, h0, residual});
    std::vector<Tensor> outs{o};
    if (ht.defined()) outs.push_back(ht);
    return outs;
  }

  std::vector<Tensor> backward(autograd::FunctionCtx& ctx,
                               const std::vector<Tensor>& grads) override {
    const auto& s = ctx.saved();
    const Tensor &q = s[0], &k = s[1], &v = s[2], &g = s[3], &beta = s[4], &h0 = s[5],
                 &residual = s[6];
    const Device dev = q.device();
    const DType dt = q.dtype(), ad = acc_dtype(dt);
    Tensor d_o = grads[0].defined() ? contiguous(cast(grads[0], dt))
                                    : zeros({p_.B, p_.T, p_.HV, p_.V}, dt, dev);
    Tensor dht = grads.size() > 1 && grads[1].defined() ? contiguous(cast(grads[1], ad)) : Tensor();
    Tensor dq = empty(q.shape(), dt, dev), dk = empty(k.shape(), dt, dev);
    Tensor dv = empty(v.shape(), dt, dev), dg = empty(g.shape(), dt, dev);
    Tensor dbeta = empty(beta.shape(), dt, dev);
    Tensor dh0 = h0.defined() ? empty(h0.shape(), ad, dev) : Tensor();
    {
      Tensor ws = workspace(workspace_elems(p_, dev, dt, true), ad, dev);
      if (!dev.is_meta()) {
        dispatch_dtype<KernelTypes>(dt, "kimi_delta_rule", [&](auto tag) {
          using scalar_t = typename decltype(tag)::type;
          using A = acc_t<scalar_t>;
          const auto args = inputs_of<scalar_t>(q, k, v, g, beta, h0);
          kda::BackwardArgs<scalar_t> b;
          b.d_o = ptr<scalar_t>(d_o);
          b.dht = ptr<A>(dht);
          b.residual = ptr<A>(residual);
          b.workspace = ptr<A>(ws);
          b.dq = ptr<scalar_t>(dq);
          b.dk = ptr<scalar_t>(dk);
          b.dv = ptr<scalar_t>(dv);
          b.dg = ptr<scalar_t>(dg);
          b.dbeta = ptr<scalar_t>(dbeta);
          b.dh0 = ptr<A>(dh0);
          GDN_RUN_ON_DEVICE(dev, "kimi_delta_rule backward",
                            kda::backward_cpu<scalar_t>(p_, args, b),
                            kda::backward_cuda<scalar_t>(p_, args, b, detail::stream_of(dev)));
        });
      }
    }
    return {dq, dk, dv, dg, dbeta, dh0};
  }

 private:
  kda::Problem p_;
};

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
  p.B = q.size(0);
  p.T = q.size(1);
  p.H = q.size(2);
  p.K = q.size(3);
  p.HV = v.size(2);
  p.V = v.size(3);
  GDN_CHECK(v.size(0) == p.B && v.size(1) == p.T && g.shape() == Shape({p.B, p.T, p.HV, p.K}) &&
                beta.shape() == Shape({p.B, p.T, p.HV}),
            "kimi_delta_rule: sizes differ (g must be [B, T, HV, K], beta [B, T, HV]): ", shapes());
  for (const Tensor* t : {&k, &v, &g, &beta}) detail::check_same_dtype("kimi_delta_rule", q, *t);
  p.chunk = opt.chunk_size;
  p.impl = opt.impl;
  p.scale = opt.scale ? *opt.scale : 1.0 / std::sqrt(double(p.K));
  p.has_h0 = h0.defined();
  p.want_ht = opt.output_final_state;
  p.cu_seqlens = opt.cu_seqlens;
  if (h0.defined()) {
    const Shape want{p.num_seqs(), p.HV, p.K, p.V};
    GDN_CHECK(h0.shape() == want, "kimi_delta_rule: h0 ", shape_str(h0.shape()), " must be ",
              p.packed() ? "[N, HV, K, V] (N sequences in cu_seqlens) = " : "[B, HV, K, V] = ",
              shape_str(want));
    GDN_CHECK(h0.dtype() == acc_dtype(q.dtype()), "kimi_delta_rule: h0 must be ",
              dtype_name(acc_dtype(q.dtype())), " for ", dtype_name(q.dtype()), " inputs, got ",
              dtype_name(h0.dtype()));
  }
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
