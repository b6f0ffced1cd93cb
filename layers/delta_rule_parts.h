// Pieces the delta-rule mixers share (Gated DeltaNet, Kimi Delta Attention): fla's
// initialisation of A_log and dt_bias, the generation state, and the kernel's inputs q, k, v and
// beta from x (projections, short convs that carry their last inputs from one generation call to
// the next, per-head L2 norm, sigmoid).
#pragma once
#include "layers/linear.h"
#include "layers/module.h"
#include "layers/short_conv.h"
#include "layers/token_mixer.h"

namespace gdn::nn {

// Generation state of one delta-rule layer: the state and the short convs' last inputs. Each
// mixer derives its own type, so that a layer refuses another mixer's state.
struct DeltaRuleState : MixerState {
  Tensor ssm;                     // [B, HV, K, V] fp32
  Tensor conv_q, conv_k, conv_v;  // last (W - 1) inputs of each short conv, [B, W-1, C]
};

// The kernel problem of one sequence of `seq_len` tokens of a layer of `c` (gdr::Problem or
// kda::Problem: the sizes their FLOP counts read).
template <typename Problem>
Problem layer_kernel_problem(const ModelConfig& c, int64_t seq_len) {
  Problem p;
  p.T = seq_len;
  p.H = c.num_heads;
  p.HV = c.v_heads();
  p.K = c.head_dim;
  p.V = c.head_v_dim();
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

}  // namespace gdn::nn
