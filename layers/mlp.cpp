// GatedMLP.
#include "layers/mlp.h"

namespace gdn::nn {

GatedMLP::GatedMLP(int64_t hidden_size, int64_t intermediate_size, const InitContext& ctx) {
  gate_proj = register_module("gate_proj",
                              std::make_shared<Linear>(hidden_size, intermediate_size, false, ctx));
  up_proj = register_module("up_proj",
                            std::make_shared<Linear>(hidden_size, intermediate_size, false, ctx));
  down_proj = register_module("down_proj",
                              std::make_shared<Linear>(intermediate_size, hidden_size, false, ctx));
}

Tensor GatedMLP::forward(const Tensor& x) const {
  ModuleScope scope(*this);
  return down_proj->forward(ops::swiglu(gate_proj->forward(x), up_proj->forward(x)));
}

}  // namespace gdn::nn
