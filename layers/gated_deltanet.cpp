// Gated DeltaNet layer. Init as fla: projections and convs N(0, initializer_range),
// A_log = log(U(0, 16)), dt_bias = softplus^-1(dt) with dt log-uniform in [1e-3, 0.1]
// clamped at 1e-4, norm weights 1.
#include "layers/gated_deltanet.h"

#include "layers/delta_rule_parts.h"

namespace gdn::nn {

GatedDeltaNet::GatedDeltaNet(const ModelConfig& cfg, const InitContext& ctx)
    : DeltaRuleMixer(cfg, "GatedDeltaNet") {
  kernel_.impl = cfg.kernel;
  kernel_.residual = cfg.residual;
  kernel_.chunk_size = int(cfg.chunk_size);
  kernel_.fused_vt = cfg.fused_vt;
  kernel_.fused_sub = cfg.fused_sub;
  const int64_t d = cfg.hidden_size, vd = cfg.value_dim(), hv = cfg.v_heads();
  add_qkv_proj(cfg, ctx);
  a_proj = register_module("a_proj", std::make_shared<Linear>(d, hv, false, ctx));
  b_proj = register_module("b_proj", std::make_shared<Linear>(d, hv, false, ctx));

  A_log = init_a_log(hv, 0.0, 16.0, ctx);
  register_parameter("A_log", &A_log);
  dt_bias = init_dt_bias(hv, ctx);
  register_parameter("dt_bias", &dt_bias);

  add_short_convs(cfg, ctx);
  if (cfg.use_gate) {
    g_proj = register_module("g_proj", std::make_shared<Linear>(d, vd, false, ctx));
    o_norm_gated =
        register_module("o_norm", std::make_shared<GatedRMSNorm>(cfg.head_v_dim(), cfg.norm_eps,
                                                                 ctx, cfg.output_gate_activation));
  } else {
    o_norm_plain =
        register_module("o_norm", std::make_shared<RMSNorm>(cfg.head_v_dim(), cfg.norm_eps, ctx));
  }
  o_proj = register_module("o_proj", std::make_shared<Linear>(vd, d, false, ctx));
}

Tensor GatedDeltaNet::run(const Tensor& x, const CuSeqlens& cu, DeltaRuleState* state) const {
  ModuleScope scope(*this);
  const DeltaRuleInputs in = inputs(x, cu, state);
  // g = -exp(A_log) softplus(a + dt_bias), in fp32 (the decay is sensitive to rounding).
  Tensor a = ops::cast(a_proj->forward(x), A_log.dtype());
  Tensor g = ops::mul(ops::neg(ops::exp(A_log)), ops::softplus(ops::add(a, dt_bias)));
  g = ops::cast(g, x.dtype());
  Tensor o = run_delta_rule(ops::gated_delta_rule, kernel_, gdr::Impl::recurrent, in, g, cu, state);
  if (g_proj) {
    Tensor gate = ops::view(g_proj->forward(x), {x.size(0), x.size(1), num_v_heads_, head_v_dim_});
    o = o_norm_gated->forward(o, gate);
  } else {
    o = o_norm_plain->forward(o);
  }
  return project_out(o);
}

Tensor GatedDeltaNet::forward_with_state(const Tensor& x, LayerState& state) const {
  return run(x, {}, own_state<GatedDeltaNetState>(state));
}

std::shared_ptr<TokenMixer> make_gated_deltanet(const ModelConfig& cfg, int64_t /*layer*/,
                                                const InitContext& ctx) {
  return std::make_shared<GatedDeltaNet>(cfg, ctx);
}

int64_t gated_deltanet_num_parameters(const ModelConfig& c, int64_t /*layer*/) {
  const int64_t d = c.hidden_size, kd = c.key_dim(), vd = c.value_dim(), hv = c.v_heads();
  int64_t n = d * kd * 2 + d * vd + 2 * d * hv + 2 * hv;  // q k v a b projections, A_log dt_bias
  if (c.use_short_conv) n += c.conv_size * (2 * kd + vd);
  if (c.use_gate) n += d * vd;  // g_proj
  n += c.head_v_dim();          // o_norm
  n += vd * d;                  // o_proj
  return n;
}

// Matmuls: 2 FLOPs per weight per token forward, twice that backward; plus the kernel's own
// count (docs/design.md, "The gated delta rule").
double gated_deltanet_train_flops_per_token(const ModelConfig& c, int64_t /*layer*/,
                                            int64_t seq_len) {
  const double d = double(c.hidden_size), kd = double(c.key_dim()), vd = double(c.value_dim());
  const double hv = double(c.v_heads());
  double linear = d * (2 * kd + vd + 2 * hv) + vd * d;  // q k v a b, o
  if (c.use_gate) linear += d * vd;
  const auto p = layer_kernel_problem<gdr::Problem>(c, seq_len);
  return 6.0 * linear + (gdr::forward_flops(p) + gdr::backward_flops(p)) / double(seq_len);
}

}  // namespace gdn::nn
