// The Gated DeltaNet layer (fla's GatedDeltaNet, same parameter names), input x [B, T, d]:
//   q, k, v = silu(shortconv(q_proj x)), ...        (silu(proj x) without short convs)
//   q, k    = l2norm per head;  beta = sigmoid(b_proj x) (x2 with allow_neg_eigval)
//   g       = -exp(A_log) * softplus(a_proj x + dt_bias)          (log decay, <= 0)
//   o       = gated_delta_rule(q, k, v, g, beta)
//   o       = rmsnorm(o) * o_norm.weight * act(g_proj x)  per head over V
//             (act: swish, or sigmoid with output_gate_activation sigmoid)
//   out     = o_proj o
// With cu_seqlens (packed sequences, B = 1) the short convs and the delta-rule state restart at
// each boundary (fla passes cu_seqlens to ShortConvolution and chunk_gated_delta_rule alike).
// A token mixer (layers/token_mixer.h) named "gated_deltanet".
#pragma once
#include "layers/delta_rule_parts.h"
#include "layers/linear.h"
#include "layers/norm.h"
#include "layers/short_conv.h"
#include "layers/token_mixer.h"
#include "src/ops/gated_delta_rule.h"

namespace gdn::nn {

// Generation state of one layer: the delta-rule state and the short convs' last inputs.
struct GatedDeltaNetState : DeltaRuleState {};

class GatedDeltaNet : public DeltaRuleMixer {
 public:
  // Sizes and the kernel options are resolved here, once (cfg is validated by the caller).
  GatedDeltaNet(const ModelConfig& cfg, const InitContext& ctx);
  Tensor forward_with_state(const Tensor& x, LayerState& state) const override;

  std::shared_ptr<Linear> a_proj, g_proj;  // and DeltaRuleMixer's
  std::shared_ptr<GatedRMSNorm> o_norm_gated;
  std::shared_ptr<RMSNorm> o_norm_plain;

 private:
  Tensor run(const Tensor& x, const CuSeqlens& cu_seqlens, DeltaRuleState* state) const override;

  ops::GdrOptions kernel_;  // training and evaluation; generation runs the recurrence
};

// The registry's entry points (layers/token_mixer.cpp).
std::shared_ptr<TokenMixer> make_gated_deltanet(const ModelConfig& cfg, int64_t layer,
                                                const InitContext& ctx);
int64_t gated_deltanet_num_parameters(const ModelConfig& cfg, int64_t layer);
double gated_deltanet_train_flops_per_token(const ModelConfig& cfg, int64_t layer, int64_t seq_len);

}  // namespace gdn::nn
