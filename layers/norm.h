// RMSNorm (x / rms(x) * w) and the gated output norm of Gated DeltaNet
// (rmsnorm(o) * w * silu(gate), fla's FusedRMSNormGated), weights initialised to 1.
#pragma once
#include "layers/linear.h"

namespace gdn::nn {

class RMSNorm : public Module {
 public:
  RMSNorm(int64_t dim, double eps, const InitContext& ctx);
  Tensor forward(const Tensor& x) const;
  Tensor weight;
  double eps;
};

class GatedRMSNorm : public Module {
 public:
  GatedRMSNorm(int64_t dim, double eps, const InitContext& ctx);
  Tensor forward(const Tensor& x, const Tensor& gate) const;
  Tensor weight;
  double eps;
};

}  // namespace gdn::nn
