// RMSNorm (x / rms(x) * w) and the gated output norm of Gated DeltaNet
// (rmsnorm(o) * w * silu(gate), fla's FusedRMSNormGated), weights initialised to 1.
#pragma once
#include "layers/module.h"

namespace gdn::nn {

class RMSNorm : public Module {
 public:
  RMSNorm(int64_t dim, double eps, const InitContext& ctx);
  Tensor forward(const Tensor& x) const;
  Tensor weight;
  double eps;
};

// The same weight and eps; the forward also takes the gate.
class GatedRMSNorm : public RMSNorm {
 public:
  using RMSNorm::RMSNorm;
  Tensor forward(const Tensor& x, const Tensor& gate) const;
};

}  // namespace gdn::nn
