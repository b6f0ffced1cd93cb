// Element-wise ops with broadcasting, and their backward:
//   d(a+b) = (g, g)   d(a-b) = (g, -g)   d(ab) = (g b, g a)   d(a/b) = (g / b, -g a / b^2)
// summed back over broadcast dims (sum_to).
#include "kernels/cpu/elementwise.h"
#include "src/autograd/node.h"
#include "src/ops/dispatch.h"
#include "src/ops/layout.h"
#include "src/ops/ops.h"
#if defined(GDN_WITH_CUDA)
#include "kernels/cuda/elementwise.h"
#endif

namespace gdn::ops {

using detail::stream_of;
using kern::Binary;
using kern::Unary;

namespace {

// Runs a binary kernel: out = op(a, b) broadcast, same floating dtype.
Tensor binary_raw(Binary op, const Tensor& a, const Tensor& b, double alpha, const char* name) {
  const Device dev = detail::common_device(name, {a, b});
  detail::check_floating(name, a);
  detail::check_same_dtype(name, a, b);
  Shape out_shape = broadcast_shapes(a.shape(), b.shape());
  Tensor out = empty(out_shape, a.dtype(), dev);
  if (out.numel() == 0) return out;
  auto L = detail::broadcast_layout(out_shape, a, b);
  dispatch_dtype<FloatingTypes>(a.dtype(), name, [&](auto tag) {
    using scalar_t = typename decltype(tag)::type;
    GDN_RUN_ON_DEVICE(
        dev, name,
        cpu::binary(op, L, a.data<scalar_t>(), b.data<scalar_t>(), out.data<scalar_t>(), alpha),
        cuda::binary(op, L, a.data<scalar_t>(), b.data<scalar_t>(), out.data<scalar_t>(), alpha,
                     stream_of(dev)));
  });
  return out;
}

Tensor unary_raw(Unary op, const Tensor& a, double alpha, double beta, const char* name) {
  detail::check_floating(name, a);
  Tensor x = contiguous(a.detach());
  Tensor out = empty(a.shape(), a.dtype(), a.device());
  const Device dev = a.device();
  dispatch_dtype<FloatingTypes>(a.dtype(), name, [&](auto tag) {
    using scalar_t = typename decltype(tag)::type;
    GDN_RUN_ON_DEVICE(
        dev, name, cpu::unary(op, x.data<scalar_t>(), out.data<scalar_t>(), x.numel(), alpha, beta),
        cuda::unary(op, x.data<scalar_t>(), out.data<scalar_t>(), x.numel(), alpha, beta,
                    stream_of(dev)));
  });
  return out;
}

// A unary op whose backward is grad_op(saved, dy); `save_output` picks y or x as saved.
Tensor unary_op(Unary op, const Tensor& a, double alpha, double beta, const char* name,
                Binary grad_op, bool save_output) {
  Tensor out = unary_raw(op, a, alpha, beta, name);
  if (autograd::needs_grad({a})) {
    Tensor saved = save_output ? out : a.detach();
    autograd::record(name, {a}, out, {saved},
                     [grad_op, alpha, name](const std::vector<Tensor>& g,
                                            const std::vector<Tensor>& s) -> std::vector<Tensor> {
                       return {binary_raw(grad_op, s[0], g[0], alpha, name)};
                     });
  }
  return out;
}

}  // namespace

Tensor add(const Tensor& a, const Tensor& b) {
  Tensor out = binary_raw(Binary::add, a, b, 0, "add");
  if (autograd::needs_grad({a, b})) {
    Shape sa = a.shape(), sb = b.shape();
    autograd::record("add", {a, b}, out, {},
                     [sa, sb](const std::vector<Tensor>& g, const std::vector<Tensor>&) {
                       return std::vector<Tensor>{sum_to(g[0], sa), sum_to(g[0], sb)};
                     });
  }
  return out;
}

Tensor sub(const Tensor& a, const Tensor& b) {
  Tensor out = binary_raw(Binary::sub, a, b, 0, "sub");
  if (autograd::needs_grad({a, b})) {
    Shape sa = a.shape(), sb = b.shape();
    autograd::record("sub", {a, b}, out, {},
                     [sa, sb](const std::vector<Tensor>& g, const std::vector<Tensor>&) {
                       return std::vector<Tensor>{sum_to(g[0], sa), sum_to(neg(g[0]), sb)};
                     });
  }
  return out;
}

Tensor mul(const Tensor& a, const Tensor& b) {
  Tensor out = binary_raw(Binary::mul, a, b, 0, "mul");
  if (autograd::needs_grad({a, b})) {
    const bool ga = a.requires_grad(), gb = b.requires_grad();
    autograd::record("mul", {a, b}, out, {gb ? a.detach() : Tensor(), ga ? b.detach() : Tensor()},
                     [ga, gb, sa = a.shape(), sb = b.shape()](const std::vector<Tensor>& g,
                                                              const std::vector<Tensor>& s) {
                       return std::vector<Tensor>{ga ? sum_to(mul(g[0], s[1]), sa) : Tensor(),
                                                  gb ? sum_to(mul(g[0], s[0]), sb) : Tensor()};
                     });
  }
  return out;
}

Tensor div(const Tensor& a, const Tensor& b) {
  Tensor out = binary_raw(Binary::div, a, b, 0, "div");
  if (autograd::needs_grad({a, b})) {
    const bool gb = b.requires_grad();
    autograd::record("div", {a, b}, out, {b.detach(), gb ? out : Tensor()},
                     [gb, sa = a.shape(), sb = b.shape()](const std::vector<Tensor>& g,
                                                          const std::vector<Tensor>& s) {
                       Tensor ga = div(g[0], s[0]);  // g / b
                       // d/db (a/b) = -a/b^2 = -(a/b) / b
                       Tensor gbv = gb ? sum_to(neg(mul(ga, s[1])), sb) : Tensor();
                       return std::vector<Tensor>{sum_to(ga, sa), gbv};
                     });
  }
  return out;
}

Tensor affine(const Tensor& a, double alpha, double beta) {
  Tensor out = unary_raw(Unary::affine, a, alpha, beta, "affine");
  if (autograd::needs_grad({a})) {
    autograd::record(
        "affine", {a}, out, {}, [alpha](const std::vector<Tensor>& g, const std::vector<Tensor>&) {
          return std::vector<Tensor>{unary_raw(Unary::affine, g[0], alpha, 0.0, "affine")};
        });
  }
  return out;
}

Tensor add(const Tensor& a, double s) {
  return affine(a, 1.0, s);
}
Tensor mul(const Tensor& a, double s) {
  return affine(a, s, 0.0);
}
Tensor rsub(const Tensor& a, double s) {
  return affine(a, -1.0, s);
}
Tensor neg(const Tensor& a) {
  return affine(a, -1.0, 0.0);
}

Tensor pow(const Tensor& a, double p) {
  return unary_op(Unary::pow, a, p, 0, "pow", Binary::pow_grad, false);
}
Tensor exp(const Tensor& a) {
  // d exp(x) = y dy: the mul-backward of (y, dy)
  return unary_op(Unary::exp, a, 0, 0, "exp", Binary::mul, true);
}
Tensor log(const Tensor& a) {
  // d log(x) = dy / x: binary div with operands (dy, x), so wrap by hand
  Tensor out = unary_raw(Unary::log, a, 0, 0, "log");
  if (autograd::needs_grad({a}))
    autograd::record("log", {a}, out, {a.detach()},
                     [](const std::vector<Tensor>& g, const std::vector<Tensor>& s) {
                       return std::vector<Tensor>{binary_raw(Binary::div, g[0], s[0], 0, "log")};
                     });
  return out;
}
Tensor sigmoid(const Tensor& a) {
  return unary_op(Unary::sigmoid, a, 0, 0, "sigmoid", Binary::sigmoid_grad, true);
}
Tensor silu(const Tensor& a) {
  return unary_op(Unary::silu, a, 0, 0, "silu", Binary::silu_grad, false);
}
Tensor softplus(const Tensor& a) {
  return unary_op(Unary::softplus, a, 0, 0, "softplus", Binary::softplus_grad, false);
}
Tensor rsqrt(const Tensor& a) {
  return unary_op(Unary::rsqrt, a, 0, 0, "rsqrt", Binary::rsqrt_grad, true);
}
Tensor sqrt(const Tensor& a) {
  return unary_op(Unary::sqrt, a, 0, 0, "sqrt", Binary::sqrt_grad, true);
}
Tensor square(const Tensor& a) {
  return unary_op(Unary::square, a, 2.0, 0, "square", Binary::pow_grad, false);
}
Tensor tanh(const Tensor& a) {
  return unary_op(Unary::tanh, a, 0, 0, "tanh", Binary::tanh_grad, true);
}
Tensor abs(const Tensor& a) {
  return unary_op(Unary::abs, a, 0, 0, "abs", Binary::abs_grad, false);
}

}  // namespace gdn::ops

namespace gdn {
Tensor operator+(const Tensor& a, const Tensor& b) {
  return ops::add(a, b);
}
Tensor operator-(const Tensor& a, const Tensor& b) {
  return ops::sub(a, b);
}
Tensor operator*(const Tensor& a, const Tensor& b) {
  return ops::mul(a, b);
}
Tensor operator/(const Tensor& a, const Tensor& b) {
  return ops::div(a, b);
}
Tensor operator+(const Tensor& a, double s) {
  return ops::add(a, s);
}
Tensor operator-(const Tensor& a, double s) {
  return ops::add(a, -s);
}
Tensor operator*(const Tensor& a, double s) {
  return ops::mul(a, s);
}
Tensor operator/(const Tensor& a, double s) {
  return ops::mul(a, 1.0 / s);
}
Tensor operator*(double s, const Tensor& a) {
  return ops::mul(a, s);
}
Tensor operator-(const Tensor& a) {
  return ops::neg(a);
}
}  // namespace gdn
