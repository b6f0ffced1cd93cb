// Pieces the delta-rule mixers share (Gated DeltaNet, Kimi Delta Attention): fla's
// initialisation of A_log and dt_bias, the generation state, the kernel's inputs q, k, v and
// beta from x (projections, short convs that carry their last inputs from one generation call to
// the next, per-head L2 norm, sigmoid), the kernel call with or without a state, and the base
// class that holds the parameters both have.
#pragma once
#include <memory>

#include "layers/linear.h"
#include "layers/module.h"
#include "layers/short_conv.h"
#include "layers/token_mixer.h"
#include "src/core/error.h"

namespace gdn::nn {

// Generation state of one delta-rule layer: the state and the short convs' last inputs. Each
// mixer derives its own type, so that a layer refuses another mixer's state.
struct DeltaRuleState : MixerState {
  Tensor ssm;                     // [B, HV, K, V] fp32
  Tensor conv_q, conv_k, conv_v;  // last (W - 1) inputs of each short conv, [B, W-1, C]
};

// The kernel problem of one sequence of `seq_len` tokens of a layer of `c` (gdr::Problem or
// kda::Problem: the sizes their FLOP counts read). c's chunk_size must be resolved for a device
// (ModelConfig::kernel_chunk): the count depends on it.
template <typename Problem>
Problem layer_kernel_problem(const ModelConfig& c, int64_t seq_len) {
  Problem p;
  p.T = seq_len;
  p.H = c.num_heads;
  p.HV = c.v_heads();
  p.K = c.head_dim;
  p.V = c.head_v_dim();
  GDN_CHECK(c.chunk_size > 0, "layer_kernel_problem: model.chunk_size 0 is the device's choice; ",
            "resolve it first (ModelConfig::kernel_chunk)");
  p.chunk = int(c.chunk_size);
  return p;
}

// A layer's projections to the kernel's inputs (its convs null without short convs) and sizes.
struct DeltaRuleProjections {
  const Linear *q, *k, *v, *b;
  const ShortConv *q_conv, *k_conv, *v_conv;
  int64_t H, HV, K, V;
  bool allow_neg_eigval;
};
struct DeltaRuleInputs {
  Tensor q, k, v, beta;  // [B, T, H, K] x 2, [B, T, HV, V], [B, T, HV]
};
// q, k = l2norm per head of silu(conv(proj x)) (silu(proj x) without convs), v likewise without
// the norm, beta = sigmoid(b x) (x2 with allow_neg_eigval); with a state, the convs continue from
// its tails and update them.
DeltaRuleInputs delta_rule_inputs(const DeltaRuleProjections& p, const Tensor& x,
                                  const CuSeqlens& cu, DeltaRuleState* state);

// A_log = log(A), A ~ U(low, high) (Gated DeltaNet: U(0, 16); KDA: U(1, 16)), n elements.
Tensor init_a_log(int64_t n, double low, double high, const InitContext& ctx);
// dt_bias = softplus^-1(dt) = dt + log(-expm1(-dt)), dt log-uniform in [1e-3, 0.1] clamped at
// 1e-4, n elements.
Tensor init_dt_bias(int64_t n, const InitContext& ctx);

// The kernel (ops::gated_delta_rule or ops::kimi_delta_rule) on in and the log decay g, with the
// layer's options `opt` over cu; with a state, the recurrence (generation: one step at a time)
// from state->ssm, which becomes the final state. Returns o [B, T, HV, V].
template <typename Options, typename Kernel>
Tensor run_delta_rule(const Kernel& kernel, Options opt, decltype(Options::impl) recurrent,
                      const DeltaRuleInputs& in, const Tensor& g, const CuSeqlens& cu,
                      DeltaRuleState* state) {
  opt.cu_seqlens = cu;
  Tensor h0;
  if (state) {
    opt.impl = recurrent;
    opt.output_final_state = true;
    h0 = state->ssm;
  }
  auto r = kernel(in.q, in.k, in.v, g, in.beta, opt, h0);
  if (state) state->ssm = r.ht.detach();
  return r.o;
}

// A delta-rule mixer: the sizes, the parameters both mixers have (fla's names), the input check,
// q, k, v, beta and the output projection; a mixer adds its decay, its output gate and its kernel
// (run). The constructors register the parameters in fla's order, which differs between the two
// (it fixes the init's random draws), so each mixer calls add_qkv_proj and add_short_convs where
// its order has them.
class DeltaRuleMixer : public TokenMixer {
 public:
  using TokenMixer::forward;
  Tensor forward(const Tensor& x, const CuSeqlens& cu_seqlens) const override;

  std::shared_ptr<Linear> q_proj, k_proj, v_proj, b_proj, o_proj;
  std::shared_ptr<ShortConv> q_conv1d, k_conv1d, v_conv1d;
  Tensor A_log, dt_bias;

 protected:
  // Sizes from cfg (validated by the caller); `kind` (the class name) names the layer in errors.
  DeltaRuleMixer(const ModelConfig& cfg, const char* kind);
  // q_proj, k_proj, v_proj: d -> key_dim, key_dim, value_dim, no biases.
  void add_qkv_proj(const ModelConfig& cfg, const InitContext& ctx);
  // q_conv1d, k_conv1d, v_conv1d, with model.use_short_conv.
  void add_short_convs(const ModelConfig& cfg, const InitContext& ctx);
  // x [B, T, hidden_size] (checked) -> q, k, v, beta (delta_rule_inputs).
  DeltaRuleInputs inputs(const Tensor& x, const CuSeqlens& cu, DeltaRuleState* state) const;
  // o [B, T, HV, V] -> o_proj o [B, T, hidden_size].
  Tensor project_out(const Tensor& o) const;
  // The caller's state as this mixer's State (a new one at first); another mixer's is refused.
  template <typename State>
  State* own_state(LayerState& state) const {
    if (!state) state = std::make_unique<State>();
    auto* own = dynamic_cast<State*>(state.get());
    GDN_CHECK(own, kind_, " '", name(), "': the generation state belongs to another mixer");
    return own;
  }
  // The mixer on x: training and evaluation (state null) or generation.
  virtual Tensor run(const Tensor& x, const CuSeqlens& cu, DeltaRuleState* state) const = 0;

  const char* kind_;
  int64_t hidden_size_, num_heads_, num_v_heads_, head_k_dim_, head_v_dim_;
  bool allow_neg_eigval_;
};

}  // namespace gdn::nn
