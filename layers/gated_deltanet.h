// The Gated DeltaNet layer (fla's GatedDeltaNet, same parameter names), input x [B, T, d]:
//   q, k, v = silu(shortconv(q_proj x)), ...        (silu(proj x) without short convs)
//   q, k    = l2norm per head;  beta = sigmoid(b_proj x) (x2 with allow_neg_eigval)
//   g       = -exp(A_log) * softplus(a_proj x + dt_bias)          (log decay, <= 0)
//   o       = gated_delta_rule(q, k, v, g, beta)
//   o       = rmsnorm(o) * o_norm.weight * silu(g_proj x)  per head over V
//   out     = o_proj o
#pragma once
#include "layers/config.h"
#include "layers/mlp.h"
#include "layers/norm.h"

namespace gdn::nn {

// The recurrent state of one layer for generation: the delta-rule state and the conv tails.
struct LayerState {
  Tensor ssm;                     // [B, HV, K, V] fp32
  Tensor conv_q, conv_k, conv_v;  // last (W - 1) inputs of each short conv, [B, W-1, C]
};

class GatedDeltaNet : public Module {
 public:
  GatedDeltaNet(const ModelConfig& cfg, const InitContext& ctx);
  Tensor forward(const Tensor& x) const;
  // Runs x [B, T, d] continuing from `state` (updated in place; empty state = fresh).
  Tensor forward_with_state(const Tensor& x, LayerState& state) const;

  ModelConfig cfg;
  std::shared_ptr<Linear> q_proj, k_proj, v_proj, a_proj, b_proj, g_proj, o_proj;
  std::shared_ptr<ShortConv> q_conv1d, k_conv1d, v_conv1d;
  std::shared_ptr<GatedRMSNorm> o_norm_gated;
  std::shared_ptr<RMSNorm> o_norm_plain;
  Tensor A_log, dt_bias;

 private:
  Tensor run(const Tensor& x, LayerState* state) const;
};

}  // namespace gdn::nn
