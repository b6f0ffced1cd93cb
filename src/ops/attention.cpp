// attention(): shape and dtype checks, the output and the saved lse (tagged activation by
// autograd when saved), workspaces (tagged workspace, freed after each call), then the kernel of
// the device (kernels/cpu/attention.h, kernels/cuda/attention_cuda.h; on CUDA bf16 cuDNN's fused
// attention where attn::run_on_cudnn says so, kernels/cuda/attention_cudnn.h, each pass deciding
// for itself: both save the same lse). On meta only the allocations happen (workspaces sized as
// the CPU's).
#include "src/ops/attention.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "kernels/cpu/attention.h"
#if defined(GDN_WITH_CUDA)
#include "kernels/cuda/attention_cuda.h"
#endif
#include "src/autograd/function.h"
#include "src/ops/dispatch.h"
#include "src/ops/kernel_scratch.h"
#include "src/ops/ops.h"

namespace gdn::ops {

namespace {

using detail::acc_dtype;
using detail::workspace;

attn::Problem problem_of(const Tensor& q, const Tensor& k, const Tensor& v,
                         const AttentionOptions& opt) {
  auto shapes = [&] {
    return str_cat("q ", shape_str(q.shape()), ", k ", shape_str(k.shape()), ", v ",
                   shape_str(v.shape()));
  };
  GDN_CHECK(q.dim() == 4 && k.dim() == 4 && k.shape() == v.shape(),
            "attention expects q [B, T, H, D], k and v [B, T, HKV, D]; got ", shapes());
  GDN_CHECK(k.size(0) == q.size(0) && k.size(1) == q.size(1) && k.size(3) == q.size(3),
            "attention: q and k/v differ in batch, time or head dim: ", shapes());
  detail::check_same_dtype("attention", q, k);
  detail::check_same_dtype("attention", q, v);
  attn::Problem p;
  p.B = q.size(0);
  p.T = q.size(1);
  p.H = q.size(2);
  p.HKV = k.size(2);
  p.D = q.size(3);
  p.window = opt.window;
  p.scale = opt.scale ? *opt.scale : 1.0 / std::sqrt(double(p.D));
  p.cu_seqlens = opt.cu_seqlens;
  try {
    attn::validate(p);
  } catch (const std::invalid_argument& e) {
    GDN_FAIL("attention: ", e.what(), " (", shapes(), ")");
  }
  return p;
}

template <typename T>
T* ptr(const Tensor& t) {
  return t.data<T>();
}

// Acc elements of workspace the device's kernels need (the CPU and CUDA kernels keep different
// scratch; meta sizes the CPU's).
int64_t workspace_elems(const attn::Problem& p, Device dev, bool backward) {
#if defined(GDN_WITH_CUDA)
  if (dev.is_cuda())
    return backward ? attn::cuda_backward_workspace_elems(p)
                    : attn::cuda_forward_workspace_elems(p);
#else
  (void)dev;
#endif
  return backward ? attn::backward_workspace_elems(p) : attn::forward_workspace_elems(p);
}

// Bytes of cuDNN workspace when this pass runs on cuDNN's fused attention, -1 when the device's
// own kernel runs it (CPU, meta, flash asked for, or cuDNN unable under auto).
int64_t cudnn_bytes(const attn::Problem& p, attn::Impl impl, DType dt, Device dev, bool backward) {
#if defined(GDN_WITH_CUDA)
  if (!dev.is_cuda()) return -1;
  const attn::Impl req = impl;  // resolved before the call (model.attention_impl)
  if (req == attn::Impl::flash) return -1;
  std::string why = str_cat("cuDNN's fused attention runs bf16 here, got ", dtype_name(dt));
  const int64_t bytes = dt == DType::bfloat16
                            ? attn::cudnn_workspace_bytes(p, backward, detail::stream_of(dev), &why)
                            : -1;
  try {
    attn::run_on_cudnn(req, bytes >= 0 ? std::string() : why);
  } catch (const std::invalid_argument& e) {
    GDN_FAIL("attention: ", e.what());
  }
  return bytes;
#else
  (void)p, (void)impl, (void)dt, (void)dev, (void)backward;
  return -1;
#endif
}

class AttentionFn final : public autograd::Function {
 public:
  AttentionFn(attn::Problem p, attn::Impl impl) : p_(std::move(p)), impl_(impl) {}
  const char* name() const override { return "attention"; }

  // inputs: q, k, v (contiguous)
  std::vector<Tensor> forward(autograd::FunctionCtx& ctx, const std::vector<Tensor>& in) override {
    const Tensor &q = in[0], &k = in[1], &v = in[2];
    const Device dev = q.device();
    const DType ad = acc_dtype(q.dtype());
    Tensor o = empty(q.shape(), q.dtype(), dev);
    Tensor lse = empty({p_.B, p_.H, p_.T}, ad, dev);
    if (const int64_t bytes = cudnn_bytes(p_, impl_, q.dtype(), dev, false); bytes >= 0) {
#if defined(GDN_WITH_CUDA)
      Tensor ws = workspace((bytes + 3) / 4, DType::float32, dev);
      attn::forward_cudnn(p_, ptr<bf16>(q), ptr<bf16>(k), ptr<bf16>(v), ptr<bf16>(o),
                          ptr<float>(lse), ws.data_ptr(), detail::stream_of(dev));
#endif
    } else {
      Tensor ws = workspace(workspace_elems(p_, dev, false), ad, dev);
      if (!dev.is_meta()) {
        dispatch_dtype<KernelTypes>(q.dtype(), "attention", [&](auto tag) {
          using scalar_t = typename decltype(tag)::type;
          using A = acc_t<scalar_t>;
          const scalar_t *qp = ptr<scalar_t>(q), *kp = ptr<scalar_t>(k), *vp = ptr<scalar_t>(v);
          GDN_RUN_ON_DEVICE(
              dev, "attention",
              attn::forward_cpu<scalar_t>(p_, qp, kp, vp, ptr<scalar_t>(o), ptr<A>(lse),
                                          ptr<A>(ws)),
              attn::forward_cuda<scalar_t>(p_, qp, kp, vp, ptr<scalar_t>(o), ptr<A>(lse),
                                           ptr<A>(ws), detail::stream_of(dev)));
        });
      }
    }
    ctx.save_for_backward({q, k, v, o, lse});
    return {o};
  }

  std::vector<Tensor> backward(autograd::FunctionCtx& ctx,
                               const std::vector<Tensor>& grads) override {
    const auto& s = ctx.saved();
    const Tensor &q = s[0], &k = s[1], &v = s[2], &o = s[3], &lse = s[4];
    const Device dev = q.device();
    const DType dt = q.dtype(), ad = acc_dtype(dt);
    if (!grads[0].defined()) return {Tensor(), Tensor(), Tensor()};
    Tensor d_o = contiguous(cast(grads[0], dt));
    Tensor dq = empty(q.shape(), dt, dev), dk = empty(k.shape(), dt, dev);
    Tensor dv = empty(v.shape(), dt, dev);
    if (const int64_t bytes = cudnn_bytes(p_, impl_, dt, dev, true); bytes >= 0) {
#if defined(GDN_WITH_CUDA)
      Tensor ws = workspace((bytes + 3) / 4, DType::float32, dev);
      attn::backward_cudnn(p_, ptr<bf16>(q), ptr<bf16>(k), ptr<bf16>(v), ptr<bf16>(o),
                           ptr<float>(lse), ptr<bf16>(d_o), ptr<bf16>(dq), ptr<bf16>(dk),
                           ptr<bf16>(dv), ws.data_ptr(), detail::stream_of(dev));
#endif
    } else {
      Tensor ws = workspace(workspace_elems(p_, dev, true), ad, dev);
      if (!dev.is_meta()) {
        dispatch_dtype<KernelTypes>(dt, "attention", [&](auto tag) {
          using scalar_t = typename decltype(tag)::type;
          using A = acc_t<scalar_t>;
          const scalar_t *qp = ptr<scalar_t>(q), *kp = ptr<scalar_t>(k), *vp = ptr<scalar_t>(v);
          const scalar_t *op = ptr<scalar_t>(o), *dop = ptr<scalar_t>(d_o);
          GDN_RUN_ON_DEVICE(
              dev, "attention backward",
              attn::backward_cpu<scalar_t>(p_, qp, kp, vp, op, ptr<A>(lse), dop, ptr<scalar_t>(dq),
                                           ptr<scalar_t>(dk), ptr<scalar_t>(dv), ptr<A>(ws)),
              attn::backward_cuda<scalar_t>(p_, qp, kp, vp, op, ptr<A>(lse), dop, ptr<scalar_t>(dq),
                                            ptr<scalar_t>(dk), ptr<scalar_t>(dv), ptr<A>(ws),
                                            detail::stream_of(dev)));
        });
      }
    }
    return {dq, dk, dv};
  }

 private:
  attn::Problem p_;
  attn::Impl impl_;
};

}  // namespace

Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionOptions& opt) {
  detail::common_device("attention", {q, k, v});
  attn::Problem p = problem_of(q, k, v, opt);
  auto fn = std::make_shared<AttentionFn>(std::move(p), opt.impl);
  return autograd::apply(fn, {contiguous(q), contiguous(k), contiguous(v)})[0];
}

}  // namespace gdn::ops
