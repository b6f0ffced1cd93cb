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

std::pair<Tensor, Tensor> RMSNorm::forward_residual(const Tensor& x, const Tensor& residual) const {
  ModuleScope scope(*this);
  return ops::add_rms_norm(x, residual, ops::cast(weight, x.dtype()), eps);
}

GatedRMSNorm::GatedRMSNorm(int64_t dim, double eps_in, const InitContext& ctx,
                           GateActivation activation)
    : RMSNorm(dim, eps_in, ctx), sigmoid_gate_(activation == GateActivation::sigmoid) {}

Tensor GatedRMSNorm::forward(const Tensor& x, const Tensor& gate) const {
  ModuleScope scope(*this);
  GDN_CHECK(x.shape() == gate.shape(), "gated norm: input ", shape_str(x.shape()), " and gate ",
            shape_str(gate.shape()), " differ");
  return ops::gated_rms_norm(x, ops::cast(weight, x.dtype()), gate, eps, sigmoid_gate_);
}

}  // namespace gdn::nn
