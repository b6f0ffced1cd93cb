// ShortConv: fla's ShortConvolution, a causal depthwise conv1d then SiLU, weight [C, 1, W]
// initialised N(0, initializer_range).
#pragma once
#include "layers/module.h"

namespace gdn::nn {

class ShortConv : public Module {
 public:
  ShortConv(int64_t channels, int64_t width, const InitContext& ctx);
  Tensor forward(const Tensor& x) const;  // x [B, T, C]
  Tensor weight;
};

}  // namespace gdn::nn
