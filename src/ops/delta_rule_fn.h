// The autograd Function the delta-rule ops share (gated_delta_rule, kimi_delta_rule): allocation
// of outputs, the residual (saved for backward, tagged activation by autograd) and workspaces
// (tagged workspace, freed after each call), the kernel for the device, and the backward's
// wiring. On meta only the allocations happen.
//
// A Family names a kernel family's types (derive from DeltaRuleTypes) and sizes:
//   static constexpr const char* op, *op_backward;   // dispatch and trace names
//   static const char* name(const Problem&);          // the autograd node's name
//   workspace_elems(const Problem&, Device, DType, bool backward);  // scratch elements
// Its kernels (residual_elems, forward_cpu, backward_cpu, forward_cuda, backward_cuda) are found
// by argument-dependent lookup in the Problem's namespace (gdr::, kda::).
#pragma once
#include <cmath>
#include <utility>
#include <vector>

#include "src/autograd/function.h"
#include "src/ops/dispatch.h"
#include "src/ops/kernel_scratch.h"
#include "src/ops/ops.h"

namespace gdn::ops::detail {

template <typename T>
T* ptr(const Tensor& t) {
  return t.defined() ? t.data<T>() : nullptr;
}

// The Problem and argument types of a kernel family (gdr::, kda::).
template <class P, template <typename> class In, template <typename> class Fwd,
          template <typename> class Bwd>
struct DeltaRuleTypes {
  using Problem = P;
  template <typename T>
  using Inputs = In<T>;
  template <typename T>
  using ForwardOutputs = Fwd<T>;
  template <typename T>
  using BackwardArgs = Bwd<T>;
};

// B, T, H, K from q [B, T, H, K]; HV, V from v [B, T, HV, V].
template <class Problem>
void set_sizes(Problem& p, const Tensor& q, const Tensor& v) {
  p.B = q.size(0);
  p.T = q.size(1);
  p.H = q.size(2);
  p.K = q.size(3);
  p.HV = v.size(2);
  p.V = v.size(3);
}

// The options every family's Problem takes (after set_sizes: the default scale is K^-1/2).
template <class Problem, class Options>
void set_common_options(Problem& p, const Options& opt, const Tensor& h0) {
  p.chunk = opt.chunk_size;
  p.impl = opt.impl;
  p.scale = opt.scale ? *opt.scale : 1.0 / std::sqrt(double(p.K));
  p.has_h0 = h0.defined();
  p.want_ht = opt.output_final_state;
  p.cu_seqlens = opt.cu_seqlens;
}

// h0, when given, is [N, HV, K, V] in the accumulator dtype of q's.
template <class Problem>
void check_h0(const char* op, const Problem& p, const Tensor& q, const Tensor& h0) {
  if (!h0.defined()) return;
  const Shape want{p.num_seqs(), p.HV, p.K, p.V};
  GDN_CHECK(h0.shape() == want, op, ": h0 ", shape_str(h0.shape()), " must be ",
            p.packed() ? "[N, HV, K, V] (N sequences in cu_seqlens) = " : "[B, HV, K, V] = ",
            shape_str(want));
  GDN_CHECK(h0.dtype() == acc_dtype(q.dtype()), op, ": h0 must be ",
            dtype_name(acc_dtype(q.dtype())), " for ", dtype_name(q.dtype()), " inputs, got ",
            dtype_name(h0.dtype()));
}

template <class Family>
class DeltaRuleFn final : public autograd::Function {
 public:
  using Problem = typename Family::Problem;
  explicit DeltaRuleFn(Problem p) : p_(std::move(p)) {}
  const char* name() const override { return Family::name(p_); }

  // inputs: q, k, v, g, beta (may be undefined), h0 (may be undefined)
  std::vector<Tensor> forward(autograd::FunctionCtx& ctx, const std::vector<Tensor>& in) override {
    const Tensor &q = in[0], &k = in[1], &v = in[2], &g = in[3], &beta = in[4], &h0 = in[5];
    const Device dev = q.device();
    const DType ad = acc_dtype(q.dtype());
    Tensor o = empty({p_.B, p_.T, p_.HV, p_.V}, q.dtype(), dev);
    Tensor ht = p_.want_ht ? empty({p_.num_seqs(), p_.HV, p_.K, p_.V}, ad, dev) : Tensor();
    Tensor residual = empty({residual_elems(p_)}, ad, dev);
    {
      Tensor ws = workspace(Family::workspace_elems(p_, dev, q.dtype(), false), ad, dev);
      if (!dev.is_meta()) {
        dispatch_dtype<KernelTypes>(q.dtype(), Family::op, [&](auto tag) {
          using scalar_t = typename decltype(tag)::type;
          using A = acc_t<scalar_t>;
          const auto args = inputs_of<scalar_t>(q, k, v, g, beta, h0);
          const typename Family::template ForwardOutputs<scalar_t> outs{
              ptr<scalar_t>(o), ptr<A>(ht), ptr<A>(residual), ptr<A>(ws)};
          GDN_RUN_ON_DEVICE(dev, Family::op, forward_cpu(p_, args, outs),
                            forward_cuda(p_, args, outs, stream_of(dev)));
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
    Tensor dbeta = beta.defined() ? empty(beta.shape(), dt, dev) : Tensor();
    Tensor dh0 = h0.defined() ? empty(h0.shape(), ad, dev) : Tensor();
    {
      Tensor ws = workspace(Family::workspace_elems(p_, dev, dt, true), ad, dev);
      if (!dev.is_meta()) {
        dispatch_dtype<KernelTypes>(dt, Family::op, [&](auto tag) {
          using scalar_t = typename decltype(tag)::type;
          using A = acc_t<scalar_t>;
          const auto args = inputs_of<scalar_t>(q, k, v, g, beta, h0);
          typename Family::template BackwardArgs<scalar_t> b;
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
          GDN_RUN_ON_DEVICE(dev, Family::op_backward, backward_cpu(p_, args, b),
                            backward_cuda(p_, args, b, stream_of(dev)));
        });
      }
    }
    return {dq, dk, dv, dg, dbeta, dh0};
  }

 private:
  template <typename T>
  static typename Family::template Inputs<T> inputs_of(const Tensor& q, const Tensor& k,
                                                       const Tensor& v, const Tensor& g,
                                                       const Tensor& beta, const Tensor& h0) {
    return {ptr<T>(q), ptr<T>(k), ptr<T>(v), ptr<T>(g), ptr<T>(beta), ptr<acc_t<T>>(h0)};
  }

  Problem p_;
};

}  // namespace gdn::ops::detail
