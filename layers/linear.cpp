// Linear.
#include "layers/linear.h"

namespace gdn::nn {

Linear::Linear(int64_t in_features, int64_t out_features, bool with_bias, const InitContext& ctx) {
  weight = new_parameter({out_features, in_features}, ctx);
  ops::normal_(weight, 0.0, ctx.std, ctx.gen);
  register_parameter("weight", &weight);
  if (with_bias) {
    bias = new_parameter({out_features}, ctx);
    ops::zero_(bias);
    register_parameter("bias", &bias);
  }
}

Tensor Linear::forward(const Tensor& x) const {
  ModuleScope scope(*this);
  return ops::linear(x, ops::cast(weight, x.dtype()),
                     bias.defined() ? ops::cast(bias, x.dtype()) : Tensor());
}

}  // namespace gdn::nn
