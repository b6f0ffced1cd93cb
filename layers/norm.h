// RMSNorm (x / rms(x) * w) and the gated output norm of Gated DeltaNet
// (rmsnorm(o) * w * act(gate), fla's FusedRMSNormGated with act = swish or sigmoid, its
// output_gate_activation), weights initialised to 1.
#pragma once
#include "layers/config.h"
#include "layers/module.h"

namespace gdn::nn {

class RMSNorm : public Module {
 public:
  RMSNorm(int64_t dim, double eps, const InitContext& ctx);
  Tensor forward(const Tensor& x) const;
  // {h, forward(h)} with h = x + residual, in one pass (ops::add_rms_norm).
  std::pair<Tensor, Tensor> forward_residual(const Tensor& x, const Tensor& residual) const;
  Tensor weight;
  double eps;
};

// The same weight and eps; the forward also takes the gate.
class GatedRMSNorm : public RMSNorm {
 public:
  GatedRMSNorm(int64_t dim, double eps, const InitContext& ctx,
               GateActivation activation = GateActivation::swish);
  Tensor forward(const Tensor& x, const Tensor& gate) const;

 private:
  bool sigmoid_gate_;  // resolved once: sigmoid(gate), else swish(gate) = gate * sigmoid(gate)
};

}  // namespace gdn::nn
