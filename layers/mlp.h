// ShortConv (causal depthwise conv1d then SiLU, fla's ShortConvolution; weight [C, 1, W]) and
// GatedMLP (SwiGLU: down(silu(gate(x)) * up(x))).
#pragma once
#include "layers/linear.h"

namespace gdn::nn {

class ShortConv : public Module {
 public:
  ShortConv(int64_t channels, int64_t width, const InitContext& ctx);
  Tensor forward(const Tensor& x) const;  // x [B, T, C]
  Tensor weight;
};

class GatedMLP : public Module {
 public:
  GatedMLP(int64_t hidden_size, int64_t intermediate_size, const InitContext& ctx);
  Tensor forward(const Tensor& x) const;
  std::shared_ptr<Linear> gate_proj, up_proj, down_proj;
};

}  // namespace gdn::nn
