#include "layers/delta_rule_parts.h"

#include <algorithm>
#include <cmath>

#include "src/ops/ops.h"

namespace gdn::nn {

Tensor init_a_log(int64_t n, double low, double high, const InitContext& ctx) {
  Tensor a_log = new_parameter({n}, ctx);
  std::vector<double> v = ops::rand({n}, DType::float64, Device::cpu(), ctx.gen).to_vector();
  for (double& x : v) x = std::log(std::max(low + (high - low) * x, 1e-30));
  ops::copy_(a_log, ops::from_vector(v, {n}, DType::float64));
  return a_log;
}

Tensor init_dt_bias(int64_t n, const InitContext& ctx) {
  Tensor dt_bias = new_parameter({n}, ctx);
  std::vector<double> v = ops::rand({n}, DType::float64, Device::cpu(), ctx.gen).to_vector();
  for (double& x : v) {
    const double dt =
        std::max(std::exp(x * (std::log(0.1) - std::log(0.001)) + std::log(0.001)), 1e-4);
    x = dt + std::log(-std::expm1(-dt));
  }
  ops::copy_(dt_bias, ops::from_vector(v, {n}, DType::float64));
  return dt_bias;
}

Tensor conv_with_tail(const ShortConv& conv, const Tensor& x, const CuSeqlens& cu, Tensor* tail) {
  if (!tail) return conv.forward(x, cu);
  const int64_t w = conv.weight.size(2), T = x.size(1);
  Tensor prev =
      tail->defined() ? *tail : ops::zeros({x.size(0), w - 1, x.size(2)}, x.dtype(), x.device());
  Tensor full = ops::concat({prev, x}, 1);
  Tensor y = ops::slice(conv.forward(full), 1, w - 1, w - 1 + T);
  *tail = ops::contiguous(ops::slice(full, 1, full.size(1) - (w - 1), full.size(1)));
  return y;
}

}  // namespace gdn::nn
