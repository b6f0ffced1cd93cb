// The Kimi Delta Attention layer (fla's KimiDeltaAttention, same parameter names), input x
// [B, T, d]:
//   q, k, v = silu(shortconv(q_proj x)), ...         (silu(proj x) without short convs)
//   q, k    = l2norm per head;  beta = sigmoid(b_proj x) (x2 with allow_neg_eigval)
//   f       = f_proj.1 f_proj.0 x                     (low rank: d -> head_v_dim -> HV K)
//   g       = -exp(A_log) * softplus(f + dt_bias)     per value head and key channel (log decay)
//             lower_bound * sigmoid(exp(A_log) * (f + dt_bias))  when model.lower_bound is set
//   o       = kimi_delta_rule(q, k, v, g, beta)       (S = (I - beta k k^T) Diag(exp g) S + ...)
//   o       = rmsnorm(o) * o_norm.weight * sigmoid(g_proj.1 g_proj.0 x)  per head over V
//   out     = o_proj o
// A_log [HV], dt_bias [HV K]; g_proj.1 has a bias, no other projection does. With cu_seqlens
// (packed sequences, B = 1) the short convs and the state restart at each boundary. A token mixer
// (layers/token_mixer.h) named "kimi_delta_attention": the own mixer of model_type kda.
#pragma once
#include "layers/delta_rule_parts.h"
#include "layers/linear.h"
#include "layers/norm.h"
#include "layers/short_conv.h"
#include "layers/token_mixer.h"
#include "src/ops/kimi_delta_rule.h"

namespace gdn::nn {

// Generation state of one layer: the delta-rule state and the short convs' last inputs.
struct KimiDeltaAttentionState : DeltaRuleState {};

// fla's low-rank nn.Sequential of two Linear layers, named "0" and "1".
class LowRankLinear : public Module {
 public:
  LowRankLinear(int64_t in, int64_t rank, int64_t out, bool out_bias, const InitContext& ctx);
  Tensor forward(const Tensor& x) const;
  std::shared_ptr<Linear> down, up;
};

class KimiDeltaAttention : public DeltaRuleMixer {
 public:
  KimiDeltaAttention(const ModelConfig& cfg, const InitContext& ctx);
  Tensor forward_with_state(const Tensor& x, LayerState& state) const override;

  std::shared_ptr<LowRankLinear> f_proj, g_proj;  // and DeltaRuleMixer's
  std::shared_ptr<GatedRMSNorm> o_norm;

  // The log decay g [B, T, HV, K] from f = f_proj x [B, T, HV K] (the gate's form above).
  Tensor decay(const Tensor& f) const;

 private:
  Tensor run(const Tensor& x, const CuSeqlens& cu_seqlens, DeltaRuleState* state) const override;

  std::optional<double> lower_bound_;
  ops::KdaOptions kernel_;  // training and evaluation; generation runs the recurrence
};

// The registry's entry points (layers/token_mixer.cpp).
std::shared_ptr<TokenMixer> make_kimi_delta_attention(const ModelConfig& cfg, int64_t layer,
                                                      const InitContext& ctx);
int64_t kimi_delta_attention_num_parameters(const ModelConfig& cfg, int64_t layer);
double kimi_delta_attention_train_flops_per_token(const ModelConfig& cfg, int64_t layer,
                                                  int64_t seq_len);

}  // namespace gdn::nn
