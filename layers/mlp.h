// GatedMLP (fla's SwiGLU MLP): down_proj(silu(gate_proj x) * up_proj x).
#pragma once
#include "layers/linear.h"

namespace gdn::nn {

class GatedMLP : public Module {
 public:
  GatedMLP(int64_t hidden_size, int64_t intermediate_size, const InitContext& ctx);
  Tensor forward(const Tensor& x) const;
  std::shared_ptr<Linear> gate_proj, up_proj, down_proj;
};

}  // namespace gdn::nn
