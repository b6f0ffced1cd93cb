// attention(): shape and dtype checks, the output and the saved lse (tagged activation by
// autograd when saved), workspaces (tagged workspace, freed after each call), then the kernel of
// the device from the attention registry (kernels/attention_registry.h: the CPU kernel; on CUDA
// the entry attn::cuda_pass picks, cuDNN's fused attention where attn::run_on_cudnn says so and
// our flash kernel otherwise, each pass deciding for itself: both save the same lse). On meta only
// the allocations happen (workspaces sized as the CPU's).
#include "src/ops/attention.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "kernels/attention_registry.h"
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

// What runs one pass on `dev` and the bytes of workspace it needs (kernels/attention_registry.h):
// on CUDA the entry attn::cuda_pass picks for `impl` (cuDNN's fused attention or the flash kernel),
// elsewhere the CPU kernel (meta sizes the CPU's workspace).
struct PassPlan {
  const char* name;  // the entry's
  const attn::DeviceKernels* kernels;
  int64_t workspace_bytes;
};
PassPlan plan_of(const attn::Problem& p, attn::Impl impl, DType dt, Device dev, bool backward) {
  const attn::SdpaType t = attention_type(dt);
#if defined(GDN_WITH_CUDA)
  if (dev.is_cuda()) {
    try {
      const attn::CudaPass c = attn::cuda_pass(p, impl, t, backward, detail::stream_of(dev));
      return {c.runs->name, c.runs->cuda, c.workspace_bytes};
    } catch (const std::invalid_argument& e) {
      GDN_FAIL("attention: ", e.what());
    }
  }
#endif
  const attn::Implementation& cpu = attn::implementation_of(attn::Impl::automatic);
  return {cpu.name, cpu.cpu, cpu.cpu->workspace_bytes(p, t, backward, nullptr, nullptr)};
}

// The pass's scratch in accumulator elements (its bytes rounded up), tagged workspace.
Tensor plan_workspace(const PassPlan& plan, DType acc, Device dev) {
  const int64_t unit = int64_t(dtype_size(acc));
  return workspace((plan.workspace_bytes + unit - 1) / unit, acc, dev);
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
    {
      const PassPlan plan = plan_of(p_, impl_, q.dtype(), dev, false);
      Tensor ws = plan_workspace(plan, ad, dev);
      if (!dev.is_meta()) {
        dispatch_dtype<KernelTypes>(q.dtype(), "attention", [&](auto tag) {
          using scalar_t = typename decltype(tag)::type;
          attn::Args<scalar_t> a;
          a.q = ptr<scalar_t>(q), a.k = ptr<scalar_t>(k), a.v = ptr<scalar_t>(v);
          a.o = ptr<scalar_t>(o);
          a.lse = ptr<acc_t<scalar_t>>(lse);
          a.workspace = ws.data_ptr();
          run(plan, plan.kernels->template of<scalar_t>().forward, a, dev, "attention");
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
    const PassPlan plan = plan_of(p_, impl_, dt, dev, true);
    Tensor ws = plan_workspace(plan, ad, dev);
    if (!dev.is_meta()) {
      dispatch_dtype<KernelTypes>(dt, "attention", [&](auto tag) {
        using scalar_t = typename decltype(tag)::type;
        attn::Args<scalar_t> a;
        a.q = ptr<scalar_t>(q), a.k = ptr<scalar_t>(k), a.v = ptr<scalar_t>(v);
        a.o = ptr<scalar_t>(o);
        a.lse = ptr<acc_t<scalar_t>>(lse);
        a.d_o = ptr<scalar_t>(d_o);
        a.dq = ptr<scalar_t>(dq), a.dk = ptr<scalar_t>(dk), a.dv = ptr<scalar_t>(dv);
        a.workspace = ws.data_ptr();
        run(plan, plan.kernels->template of<scalar_t>().backward, a, dev, "attention backward");
      });
    }
    return {dq, dk, dv};
  }

 private:
  // One pass of the planned kernel on dev (a trace span named `op`).
  template <typename T>
  void run(const PassPlan& plan, attn::Pass<T> kernel, const attn::Args<T>& a, Device dev,
           const char* op) const {
    GDN_CHECK(kernel, op, ": no ", dtype_name(dtype_of<T>::value), " kernel in ", plan.name);
    GDN_RUN_ON_DEVICE(dev, op, kernel(p_, a, nullptr), kernel(p_, a, detail::stream_of(dev)));
  }

  attn::Problem p_;
  attn::Impl impl_;
};

}  // namespace

attn::SdpaType attention_type(DType dt) {
  switch (dt) {
    case DType::float32:
      return attn::SdpaType::f32;
    case DType::float64:
      return attn::SdpaType::f64;
    case DType::bfloat16:
      return attn::SdpaType::bf16;
    case DType::float16:
      return attn::SdpaType::f16;
    default:
      GDN_FAIL("attention: dtype ", dtype_name(dt),
               " is not supported (float32, bfloat16, float64)");
  }
}

Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionOptions& opt) {
  detail::common_device("attention", {q, k, v});
  attn::Problem p = problem_of(q, k, v, opt);
  auto fn = std::make_shared<AttentionFn>(std::move(p), opt.impl);
  return autograd::apply(fn, {contiguous(q), contiguous(k), contiguous(v)})[0];
}

}  // namespace gdn::ops
