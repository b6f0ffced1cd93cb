// Norm layers.
#include "layers/norm.h"

namespace gdn::nn {

RMSNorm::RMSNorm(int64_t dim, double eps_in, const InitContext& ctx) : eps(eps_in) {
  weight = new_parameter({dim}, ctx);
  ops::fill_(weight, 1.0);
  register_parameter("weight", &weight);
}

Tensor RMSNorm::forward(const Tensor& x) const {
  ModuleScope scope(*this);
  return ops::rms_norm(x, ops::cast(weight, x.dtype()), eps);
}

GatedRMSNorm::GatedRMSNorm(int64_t dim, double eps_in, const InitContext& ctx,
                           GateActivation activation)
    : RMSNorm(dim, eps_in, ctx), sigmoid_gate_(activation == GateActivation::sigmoid) {}

Tensor GatedRMSNorm::forward(const Tensor& x, const Tensor& gate) const {
  ModuleScope scope(*this);
  GDN_CHECK(x.shape() == gate.shape(), "gated norm: input ", shape_str(x.shape()), " and gate ",
            shape_str(gate.shape()), " differ");
  const Tensor g = sigmoid_gate_ ? ops::sigmoid(gate) : ops::silu(gate);
  return ops::mul(ops::rms_norm(x, ops::cast(weight, x.dtype()), eps), g);
}

}  // namespace gdn::nn
