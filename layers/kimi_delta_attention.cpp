// Kimi Delta Attention layer. Init as fla: projections and convs N(0, initializer_range), biases
// 0, A_log = log(U(1, 16)) (0 with safe_gate), dt_bias = softplus^-1(dt) with dt log-uniform in
// [1e-3, 0.1] clamped at 1e-4, norm weights 1.
#include "layers/kimi_delta_attention.h"

#include "layers/delta_rule_parts.h"
#include "src/ops/ops.h"

namespace gdn::nn {

LowRankLinear::LowRankLinear(int64_t in, int64_t rank, int64_t out, bool out_bias,
                             const InitContext& ctx) {
  down = register_module("0", std::make_shared<Linear>(in, rank, false, ctx));
  up = register_module("1", std::make_shared<Linear>(rank, out, out_bias, ctx));
}

Tensor LowRankLinear::forward(const Tensor& x) const {
  return up->forward(down->forward(x));
}

KimiDeltaAttention::KimiDeltaAttention(const ModelConfig& cfg, const InitContext& ctx)
    : DeltaRuleMixer(cfg, "KimiDeltaAttention"), lower_bound_(cfg.lower_bound) {
  kernel_.impl = cfg.kernel == gdr::Impl::recurrent ? kda::Impl::recurrent : kda::Impl::chunked;
  kernel_.chunk_size = int(cfg.chunk_size);
  const int64_t d = cfg.hidden_size, vd = cfg.value_dim(), hv = cfg.v_heads();
  const int64_t gate_dim = hv * cfg.head_dim;  // a decay per value head and key channel
  add_qkv_proj(cfg, ctx);
  add_short_convs(cfg, ctx);
  f_proj = register_module(
      "f_proj", std::make_shared<LowRankLinear>(d, cfg.head_v_dim(), gate_dim, false, ctx));
  b_proj = register_module("b_proj", std::make_shared<Linear>(d, hv, false, ctx));
  A_log = cfg.safe_gate ? new_parameter({hv}, ctx) : init_a_log(hv, 1.0, 16.0, ctx);
  if (cfg.safe_gate) ops::copy_(A_log, ops::zeros({hv}, DType::float64));
  register_parameter("A_log", &A_log);
  dt_bias = init_dt_bias(gate_dim, ctx);
  register_parameter("dt_bias", &dt_bias);
  g_proj = register_module("g_proj",
                           std::make_shared<LowRankLinear>(d, cfg.head_v_dim(), vd, true, ctx));
  o_norm = register_module("o_norm", std::make_shared<GatedRMSNorm>(cfg.head_v_dim(), cfg.norm_eps,
                                                                    ctx, GateActivation::sigmoid));
  o_proj = register_module("o_proj", std::make_shared<Linear>(vd, d, false, ctx));
}

// In the parameters' dtype (fp32: the decay is sensitive to rounding), then the activations'.
Tensor KimiDeltaAttention::decay(const Tensor& f) const {
  const int64_t B = f.size(0), T = f.size(1), HV = num_v_heads_, K = head_k_dim_;
  Tensor z = ops::add(ops::reshape(ops::cast(f, A_log.dtype()), {B, T, HV, K}),
                      ops::reshape(dt_bias, {HV, K}));
  Tensor a = ops::exp(ops::reshape(A_log, {HV, 1}));
  Tensor g = lower_bound_ ? ops::mul(ops::sigmoid(ops::mul(a, z)), *lower_bound_)
                          : ops::mul(ops::neg(a), ops::softplus(z));
  return ops::cast(g, f.dtype());
}

Tensor KimiDeltaAttention::run(const Tensor& x, const CuSeqlens& cu, DeltaRuleState* state) const {
  ModuleScope scope(*this);
  const DeltaRuleInputs in = inputs(x, cu, state);
  Tensor g = decay(f_proj->forward(x));
  Tensor o = run_delta_rule(ops::kimi_delta_rule, kernel_, kda::Impl::recurrent, in, g, cu, state);
  Tensor gate = ops::view(g_proj->forward(x), {x.size(0), x.size(1), num_v_heads_, head_v_dim_});
  return project_out(o_norm->forward(o, gate));
}

Tensor KimiDeltaAttention::forward_with_state(const Tensor& x, LayerState& state) const {
  return run(x, {}, own_state<KimiDeltaAttentionState>(state));
}

std::shared_ptr<TokenMixer> make_kimi_delta_attention(const ModelConfig& cfg, int64_t /*layer*/,
                                                      const InitContext& ctx) {
  return std::make_shared<KimiDeltaAttention>(cfg, ctx);
}

int64_t kimi_delta_attention_num_parameters(const ModelConfig& c, int64_t /*layer*/) {
  const int64_t d = c.hidden_size, kd = c.key_dim(), vd = c.value_dim(), hv = c.v_heads();
  const int64_t r = c.head_v_dim(), gate_dim = hv * c.head_dim;
  int64_t n = d * kd * 2 + d * vd + d * hv;  // q k v b projections
  if (c.use_short_conv) n += c.conv_size * (2 * kd + vd);
  n += d * r + r * gate_dim;  // f_proj
  n += hv + gate_dim;         // A_log, dt_bias
  n += d * r + r * vd + vd;   // g_proj (its second layer has a bias)
  n += c.head_v_dim();        // o_norm
  n += vd * d;                // o_proj
  return n;
}

// Matmuls: 2 FLOPs per weight per token forward, twice that backward; plus the kernel's own
// count (docs/design.md, "Kimi Delta Attention kernels").
double kimi_delta_attention_train_flops_per_token(const ModelConfig& c, int64_t /*layer*/,
                                                  int64_t seq_len) {
  const double d = double(c.hidden_size), kd = double(c.key_dim()), vd = double(c.value_dim());
  const double hv = double(c.v_heads()), r = double(c.head_v_dim());
  const double gate_dim = hv * double(c.head_dim);
  const double linear = d * (2 * kd + vd + hv) + vd * d + d * r + r * gate_dim + d * r + r * vd;
  const auto p = layer_kernel_problem<kda::Problem>(c, seq_len);
  return 6.0 * linear + (kda::forward_flops(p) + kda::backward_flops(p)) / double(seq_len);
}

}  // namespace gdn::nn
