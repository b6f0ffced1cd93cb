// Linear: y = x W^T [+ b], W [out, in] initialised N(0, initializer_range) as fla does, bias 0.
// Weights are fp32 masters; they are cast to the input's dtype at use, so bf16 activations train
// fp32 weights.
#pragma once
#include "layers/module.h"
#include "src/ops/ops.h"

namespace gdn::nn {

class Linear : public Module {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias, const InitContext& ctx);
  Tensor forward(const Tensor& x) const;
  Tensor weight, bias;
};

}  // namespace gdn::nn
