// rope(): shape checks, then the device's kernel (kernels/cpu/rope.h, kernels/cuda/rope_cuda.h)
// forward (rotation by +angle) and backward (by -angle). On CUDA, packed sequences take a small
// workspace (cu_seqlens on the device; tagged workspace, freed after the call).
#include "src/ops/rope.h"

#include <algorithm>
#include <stdexcept>

#include "kernels/cpu/rope.h"
#if defined(GDN_WITH_CUDA)
#include "kernels/cuda/rope_cuda.h"
#endif
#include "src/autograd/function.h"
#include "src/ops/dispatch.h"
#include "src/ops/kernel_scratch.h"
#include "src/ops/ops.h"

namespace gdn::ops {

namespace {

// y = R(sign * angle) x, a fresh tensor (meta: shape only).
Tensor rotate(const rope::Problem& p, const Tensor& x, bool inverse) {
  const Device dev = x.device();
  Tensor y = empty(x.shape(), x.dtype(), dev);
  if (dev.is_meta()) return y;
  Tensor ws;  // CUDA: cu_seqlens on the device (none unpacked)
#if defined(GDN_WITH_CUDA)
  if (dev.is_cuda())
    ws = detail::workspace((rope::cuda_workspace_bytes(p) + 3) / 4, DType::float32, dev);
#endif
  dispatch_dtype<KernelTypes>(x.dtype(), "rope", [&](auto tag) {
    using scalar_t = typename decltype(tag)::type;
    GDN_RUN_ON_DEVICE(dev, "rope",
                      rope::apply_cpu<scalar_t>(p, x.data<scalar_t>(), y.data<scalar_t>(), inverse),
                      rope::apply_cuda<scalar_t>(p, x.data<scalar_t>(), y.data<scalar_t>(), inverse,
                                                 ws.data<float>(), detail::stream_of(dev)));
  });
  return y;
}

class RopeFn final : public autograd::Function {
 public:
  explicit RopeFn(rope::Problem p) : p_(std::move(p)) {}
  const char* name() const override { return "rope"; }
  std::vector<Tensor> forward(autograd::FunctionCtx&, const std::vector<Tensor>& in) override {
    return {rotate(p_, in[0], false)};
  }
  // The rotation is orthogonal: dx = R(angle)^T dy = R(-angle) dy.
  std::vector<Tensor> backward(autograd::FunctionCtx&, const std::vector<Tensor>& g) override {
    if (!g[0].defined()) return {Tensor()};
    return {rotate(p_, contiguous(g[0]), true)};
  }

 private:
  rope::Problem p_;
};

}  // namespace

Tensor rope(const Tensor& x, const RopeOptions& opt) {
  GDN_CHECK(x.defined() && x.dim() == 4, "rope expects x [B, T, H, D], got ",
            x.defined() ? shape_str(x.shape()) : std::string("an undefined tensor"));
  rope::Problem p;
  p.B = x.size(0);
  p.T = x.size(1);
  p.H = x.size(2);
  p.D = x.size(3);
  p.theta = opt.theta;
  p.offset = opt.offset;
  p.cu_seqlens = opt.cu_seqlens;
  try {
    rope::validate(p);
  } catch (const std::invalid_argument& e) {
    GDN_FAIL(e.what(), " (x ", shape_str(x.shape()), ")");
  }
  auto fn = std::make_shared<RopeFn>(std::move(p));
  return autograd::apply(fn, {contiguous(x)})[0];
}

}  // namespace gdn::ops
