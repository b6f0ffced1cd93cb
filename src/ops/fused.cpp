// Fused layer ops: SwiGLU, gated RMSNorm, residual add + RMSNorm. Each is one CPU pass forward
// and one backward (kernels/cpu/fused.h, the math next to each kernel) where the unfused chain
// runs a pass per op. On CUDA they compose the unfused ops (same values, no CUDA kernel of their
// own yet); on meta they allocate the outputs only.
#include "kernels/cpu/fused.h"
#include "src/autograd/node.h"
#include "src/ops/dispatch.h"
#include "src/ops/kernel_scratch.h"
#include "src/ops/ops.h"

namespace gdn::ops {

namespace {

int64_t rows_in(const Tensor& x) {
  return x.dim() ? x.numel() / x.size(-1) : 1;
}

void check_same_shape(const char* op, const Tensor& a, const Tensor& b) {
  GDN_CHECK(a.shape() == b.shape(), op, ": ", shape_str(a.shape()), " and ", shape_str(b.shape()),
            " differ");
}

void check_norm_weight(const char* op, const Tensor& x, const Tensor& weight) {
  if (!weight.defined()) return;
  detail::check_same_dtype(op, x, weight);
  GDN_CHECK(weight.dim() == 1 && weight.size(0) == x.size(-1), op, ": weight ",
            shape_str(weight.shape()), " for input ", shape_str(x.shape()));
}

}  // namespace

Tensor swiglu(const Tensor& gate, const Tensor& up) {
  const Device dev = detail::common_device("swiglu", {gate, up});
  detail::check_floating("swiglu", gate);
  detail::check_same_dtype("swiglu", gate, up);
  check_same_shape("swiglu", gate, up);
  if (dev.is_cuda()) return mul(silu(gate), up);  // CUDA: the unfused ops
  Tensor g = contiguous(gate.detach()), u = contiguous(up.detach());
  Tensor y = empty(gate.shape(), gate.dtype(), dev);
  const int64_t n = gate.numel();
  dispatch_dtype<FloatingTypes>(gate.dtype(), "swiglu", [&](auto tag) {
    using scalar_t = typename decltype(tag)::type;
    trace::Span span("kernel", "swiglu");
    if (dev.is_cpu())
      cpu::swiglu_forward(g.data<scalar_t>(), u.data<scalar_t>(), n, y.data<scalar_t>());
  });
  if (autograd::needs_grad({gate, up}))
    autograd::record("swiglu", {gate, up}, y, {g, u},
                     [n](const std::vector<Tensor>& gr, const std::vector<Tensor>& s) {
                       Tensor dy = contiguous(gr[0]);
                       const Device dev = dy.device();
                       Tensor dg = empty(s[0].shape(), s[0].dtype(), dev);
                       Tensor du = empty(s[1].shape(), s[1].dtype(), dev);
                       dispatch_dtype<FloatingTypes>(dy.dtype(), "swiglu backward", [&](auto tag) {
                         using scalar_t = typename decltype(tag)::type;
                         trace::Span span("kernel", "swiglu backward");
                         if (dev.is_cpu())
                           cpu::swiglu_backward(s[0].data<scalar_t>(), s[1].data<scalar_t>(),
                                                dy.data<scalar_t>(), n, dg.data<scalar_t>(),
                                                du.data<scalar_t>());
                       });
                       return std::vector<Tensor>{dg, du};
                     });
  return y;
}

Tensor gated_rms_norm(const Tensor& x, const Tensor& weight, const Tensor& gate, double eps,
                      bool sigmoid_gate) {
  const Device dev = detail::common_device("gated_rms_norm", {x, weight, gate});
  detail::check_floating("gated_rms_norm", x);
  detail::check_same_dtype("gated_rms_norm", x, gate);
  check_same_shape("gated_rms_norm", x, gate);
  check_norm_weight("gated_rms_norm", x, weight);
  if (dev.is_cuda())  // CUDA: the unfused ops
    return mul(rms_norm(x, weight, eps), sigmoid_gate ? sigmoid(gate) : silu(gate));
  const int64_t d = x.size(-1), n = rows_in(x);
  Tensor xc = contiguous(x.detach()), zc = contiguous(gate.detach());
  Tensor w = weight.defined() ? contiguous(weight.detach()) : Tensor();
  Tensor y = empty(x.shape(), x.dtype(), dev);
  Tensor rstd = empty({n}, detail::acc_dtype(x.dtype()), dev);
  dispatch_dtype<FloatingTypes>(x.dtype(), "gated_rms_norm", [&](auto tag) {
    using scalar_t = typename decltype(tag)::type;
    using A = acc_t<scalar_t>;
    const scalar_t* wp = w.defined() ? w.data<scalar_t>() : nullptr;
    trace::Span span("kernel", "gated_rms_norm");
    if (dev.is_cpu())
      cpu::gated_rms_norm_forward(xc.data<scalar_t>(), wp, zc.data<scalar_t>(), n, d, eps,
                                  sigmoid_gate, y.data<scalar_t>(), rstd.data<A>());
  });
  if (autograd::needs_grad({x, weight, gate}))
    autograd::record(
        "gated_rms_norm", {x, weight, gate}, y, {xc, w, zc, rstd},
        [n, d, sigmoid_gate, want_w = weight.defined() && weight.requires_grad()](
            const std::vector<Tensor>& g, const std::vector<Tensor>& s) {
          const Tensor &xc = s[0], &w = s[1], &zc = s[2], &rstd = s[3];
          Tensor dy = contiguous(g[0]);
          const Device dev = xc.device();
          Tensor dx = empty(xc.shape(), xc.dtype(), dev), dz = empty(xc.shape(), xc.dtype(), dev);
          Tensor dw = want_w ? empty({d}, xc.dtype(), dev) : Tensor();
          dispatch_dtype<FloatingTypes>(xc.dtype(), "gated_rms_norm backward", [&](auto tag) {
            using scalar_t = typename decltype(tag)::type;
            using A = acc_t<scalar_t>;
            const scalar_t* wp = w.defined() ? w.data<scalar_t>() : nullptr;
            trace::Span span("kernel", "gated_rms_norm backward");
            if (dev.is_cpu())
              cpu::gated_rms_norm_backward(xc.data<scalar_t>(), wp, zc.data<scalar_t>(),
                                           rstd.data<A>(), dy.data<scalar_t>(), n, d, sigmoid_gate,
                                           dx.data<scalar_t>(), dz.data<scalar_t>(),
                                           want_w ? dw.data<scalar_t>() : nullptr);
          });
          return std::vector<Tensor>{dx, dw, dz};
        });
  return y;
}

std::pair<Tensor, Tensor> add_rms_norm(const Tensor& x, const Tensor& residual,
                                       const Tensor& weight, double eps) {
  const Device dev = detail::common_device("add_rms_norm", {x, residual, weight});
  detail::check_floating("add_rms_norm", x);
  detail::check_same_dtype("add_rms_norm", x, residual);
  check_same_shape("add_rms_norm", x, residual);
  check_norm_weight("add_rms_norm", x, weight);
  if (dev.is_cuda()) {  // CUDA: the unfused ops
    Tensor h = add(x, residual);
    return {h, rms_norm(h, weight, eps)};
  }
  const int64_t d = x.size(-1), n = rows_in(x);
  Tensor xc = contiguous(x.detach()), rc = contiguous(residual.detach());
  Tensor w = weight.defined() ? contiguous(weight.detach()) : Tensor();
  Tensor h = empty(x.shape(), x.dtype(), dev), y = empty(x.shape(), x.dtype(), dev);
  Tensor rstd = empty({n}, detail::acc_dtype(x.dtype()), dev);
  dispatch_dtype<FloatingTypes>(x.dtype(), "add_rms_norm", [&](auto tag) {
    using scalar_t = typename decltype(tag)::type;
    using A = acc_t<scalar_t>;
    const scalar_t* wp = w.defined() ? w.data<scalar_t>() : nullptr;
    trace::Span span("kernel", "add_rms_norm");
    if (dev.is_cpu())
      cpu::add_rms_norm_forward(xc.data<scalar_t>(), rc.data<scalar_t>(), wp, n, d, eps,
                                h.data<scalar_t>(), y.data<scalar_t>(), rstd.data<A>());
  });
  if (autograd::needs_grad({x, residual, weight})) {
    std::vector<Tensor> outs{h, y};
    autograd::record(
        "add_rms_norm", {x, residual, weight}, outs, {h.detach(), w, rstd},
        [n, d, gx = x.requires_grad(), gr = residual.requires_grad(),
         want_w = weight.defined() && weight.requires_grad()](const std::vector<Tensor>& g,
                                                              const std::vector<Tensor>& s) {
          const Tensor &hs = s[0], &w = s[1], &rstd = s[2];
          const Device dev = hs.device();
          // An output without a gradient contributes zeros (undefined: none reached it).
          Tensor gh = g[0].defined() ? contiguous(g[0]) : Tensor();
          Tensor gy = g[1].defined() ? contiguous(g[1]) : zeros(hs.shape(), hs.dtype(), dev);
          Tensor dh = empty(hs.shape(), hs.dtype(), dev);
          Tensor dw = want_w ? empty({d}, hs.dtype(), dev) : Tensor();
          dispatch_dtype<FloatingTypes>(hs.dtype(), "add_rms_norm backward", [&](auto tag) {
            using scalar_t = typename decltype(tag)::type;
            using A = acc_t<scalar_t>;
            const scalar_t* wp = w.defined() ? w.data<scalar_t>() : nullptr;
            trace::Span span("kernel", "add_rms_norm backward");
            if (dev.is_cpu())
              cpu::add_rms_norm_backward(
                  hs.data<scalar_t>(), wp, rstd.data<A>(), gy.data<scalar_t>(),
                  gh.defined() ? gh.data<scalar_t>() : nullptr, n, d, dh.data<scalar_t>(),
                  want_w ? dw.data<scalar_t>() : nullptr);
          });
          // d(x + r) = (dh, dh): both inputs share the one buffer.
          return std::vector<Tensor>{gx ? dh : Tensor(), gr ? dh : Tensor(), dw};
        });
    h = outs[0];
    y = outs[1];
  }
  return {h, y};
}

}  // namespace gdn::ops
