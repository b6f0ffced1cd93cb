// Gated DeltaNet layer. Init as fla: projections and convs N(0, initializer_range),
// A_log = log(U(0, 16)), dt_bias = softplus^-1(dt) with dt log-uniform in [1e-3, 0.1]
// clamped at 1e-4, norm weights 1.
#include "layers/gated_deltanet.h"

#include "layers/delta_rule_parts.h"

namespace gdn::nn {

GatedDeltaNet::GatedDeltaNet(const ModelConfig& cfg, const InitContext& ctx)
    : hidden_size_(cfg.hidden_size),
      num_heads_(cfg.num_heads),
      num_v_heads_(cfg.v_heads()),
      head_k_dim_(cfg.head_dim),
      head_v_dim_(cfg.head_v_dim()),
      allow_neg_eigval_(cfg.allow_neg_eigval) {
  kernel_.impl = cfg.kernel;
  kernel_.residual = cfg.residual;
  kernel_.chunk_size = int(cfg.chunk_size);
  kernel_.fused_vt = cfg.fused_vt;
  kernel_.fused_sub = cfg.fused_sub;
  const int64_t d = cfg.hidden_size, kd = cfg.key_dim(), vd = cfg.value_dim(), hv = cfg.v_heads();
  q_proj = register_module("q_proj", std::make_shared<Linear>(d, kd, false, ctx));
  k_proj = register_module("k_proj", std::make_shared<Linear>(d, kd, false, ctx));
  v_proj = register_module("v_proj", std::make_shared<Linear>(d, vd, false, ctx));
  a_proj = register_module("a_proj", std::make_shared<Linear>(d, hv, false, ctx));
  b_proj = register_module("b_proj", std::make_shared<Linear>(d, hv, false, ctx));

  A_log = init_a_log(hv, 0.0, 16.0, ctx);
  register_parameter("A_log", &A_log);
  dt_bias = init_dt_bias(hv, ctx);
  register_parameter("dt_bias", &dt_bias);

  if (cfg.use_short_conv) {
    q_conv1d = register_module(
        "q_conv1d", std::make_shared<ShortConv>(kd, cfg.conv_size, ctx, cfg.conv1d_impl));
    k_conv1d = register_module(
        "k_conv1d", std::make_shared<ShortConv>(kd, cfg.conv_size, ctx, cfg.conv1d_impl));
    v_conv1d = register_module(
        "v_conv1d", std::make_shared<ShortConv>(vd, cfg.conv_size, ctx, cfg.conv1d_impl));
  }
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

DeltaRuleProjections GatedDeltaNet::projections() const {
  return {q_proj.get(),   k_proj.get(),   v_proj.get(),   b_proj.get(),
          q_conv1d.get(), k_conv1d.get(), v_conv1d.get(), num_heads_,
          num_v_heads_,   head_k_dim_,    head_v_dim_,    allow_neg_eigval_};
}

Tensor GatedDeltaNet::run(const Tensor& x, const CuSeqlens& cu, GatedDeltaNetState* state) const {
  ModuleScope scope(*this);
  GDN_CHECK(x.dim() == 3 && x.size(2) == hidden_size_, "GatedDeltaNet: input ",
            shape_str(x.shape()), " must be [B, T, ", hidden_size_, "]");
  const int64_t B = x.size(0), T = x.size(1), HV = num_v_heads_, V = head_v_dim_;
  const auto [q, k, v, beta] = delta_rule_inputs(projections(), x, cu, state);
  // g = -exp(A_log) softplus(a + dt_bias), in fp32 (the decay is sensitive to rounding).
  Tensor a = ops::cast(a_proj->forward(x), A_log.dtype());
  Tensor g = ops::mul(ops::neg(ops::exp(A_log)), ops::softplus(ops::add(a, dt_bias)));
  g = ops::cast(g, x.dtype());

  ops::GdrOptions opt = kernel_;
  opt.cu_seqlens = cu;
  Tensor h0;
  if (state) {
    opt.impl = gdr::Impl::recurrent;  // generation: one step at a time
    opt.output_final_state = true;
    h0 = state->ssm;
  }
  auto r = ops::gated_delta_rule(q, k, v, g, beta, opt, h0);
  if (state) state->ssm = r.ht.detach();

  Tensor o = r.o;
  if (g_proj) {
    Tensor gate = ops::view(g_proj->forward(x), {B, T, HV, V});
    o = o_norm_gated->forward(o, gate);
  } else {
    o = o_norm_plain->forward(o);
  }
  return o_proj->forward(ops::reshape(o, {B, T, HV * V}));
}

Tensor GatedDeltaNet::forward(const Tensor& x, const CuSeqlens& cu_seqlens) const {
  return run(x, cu_seqlens, nullptr);
}

Tensor GatedDeltaNet::forward_with_state(const Tensor& x, LayerState& state) const {
  if (!state) state = std::make_unique<GatedDeltaNetState>();
  auto* own = dynamic_cast<GatedDeltaNetState*>(state.get());
  GDN_CHECK(own, "GatedDeltaNet '", name(), "': the generation state belongs to another mixer");
  return run(x, {}, own);
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
