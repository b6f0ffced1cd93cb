#include "layers/delta_rule_parts.h"

#include <algorithm>
#include <cmath>

#include "src/ops/ops.h"

namespace gdn::nn {

Tensor init_a_log(int64_t n, double low, double high, const InitContext& ctx) {
  Tensor a_log = new_parameter({n}, ctx);
  std::vector<double> v = ops::rand({n}, DType::float64, Device::cpu(), ctx.gen).to_vector();
  for (double& x : v) x = std::log(std::max(low + (high - low) * x, 1e-30));
  ops::copy_(a_log, ops::from_vector(v, {n}, DType::float64));
  return a_log;
}

Tensor init_dt_bias(int64_t n, const InitContext& ctx) {
  Tensor dt_bias = new_parameter({n}, ctx);
  std::vector<double> v = ops::rand({n}, DType::float64, Device::cpu(), ctx.gen).to_vector();
  for (double& x : v) {
    const double dt =
        std::max(std::exp(x * (std::log(0.1) - std::log(0.001)) + std::log(0.001)), 1e-4);
    x = dt + std::log(-std::expm1(-dt));
  }
  ops::copy_(dt_bias, ops::from_vector(v, {n}, DType::float64));
  return dt_bias;
}

namespace {

// conv(x) for x [B, T, C]; with a tail (the previous W - 1 inputs, zeros at first) the conv runs
// over [tail ; x] and the tail becomes the last W - 1 inputs.
Tensor conv_with_tail(const ShortConv& conv, const Tensor& x, const CuSeqlens& cu, Tensor* tail) {
  if (!tail) return conv.forward(x, cu);
  const int64_t w = conv.weight.size(2), T = x.size(1);
  Tensor prev =
      tail->defined() ? *tail : ops::zeros({x.size(0), w - 1, x.size(2)}, x.dtype(), x.device());
  Tensor full = ops::concat({prev, x}, 1);
  Tensor y = ops::slice(conv.forward(full), 1, w - 1, w - 1 + T);
  *tail = ops::contiguous(ops::slice(full, 1, full.size(1) - (w - 1), full.size(1)));
  return y;
}

}  // namespace

DeltaRuleInputs delta_rule_inputs(const DeltaRuleProjections& p, const Tensor& x,
                                  const CuSeqlens& cu, DeltaRuleState* state) {
  const int64_t B = x.size(0), T = x.size(1);
  constexpr double kEps = 1e-6;  // fla's l2norm in the kernel
  Tensor q = p.q->forward(x), k = p.k->forward(x), v = p.v->forward(x);
  DeltaRuleInputs in;
  if (p.q_conv && !state) {  // the conv, SiLU and the norm of each head in one op
    in.q = ops::reshape(p.q_conv->forward_l2norm(q, p.K, kEps, cu), {B, T, p.H, p.K});
    in.k = ops::reshape(p.k_conv->forward_l2norm(k, p.K, kEps, cu), {B, T, p.H, p.K});
    v = p.v_conv->forward(v, cu);
  } else {
    if (p.q_conv) {
      q = conv_with_tail(*p.q_conv, q, cu, state ? &state->conv_q : nullptr);
      k = conv_with_tail(*p.k_conv, k, cu, state ? &state->conv_k : nullptr);
      v = conv_with_tail(*p.v_conv, v, cu, state ? &state->conv_v : nullptr);
    } else {
      q = ops::silu(q), k = ops::silu(k), v = ops::silu(v);
    }
    in.q = ops::l2_norm(ops::reshape(q, {B, T, p.H, p.K}), kEps);
    in.k = ops::l2_norm(ops::reshape(k, {B, T, p.H, p.K}), kEps);
  }
  in.v = ops::reshape(v, {B, T, p.HV, p.V});
  in.beta = ops::sigmoid(p.b->forward(x));
  if (p.allow_neg_eigval) in.beta = ops::mul(in.beta, 2.0);
  return in;
}

DeltaRuleMixer::DeltaRuleMixer(const ModelConfig& cfg, const char* kind)
    : kind_(kind),
      hidden_size_(cfg.hidden_size),
      num_heads_(cfg.num_heads),
      num_v_heads_(cfg.v_heads()),
      head_k_dim_(cfg.head_dim),
      head_v_dim_(cfg.head_v_dim()),
      allow_neg_eigval_(cfg.allow_neg_eigval) {}

void DeltaRuleMixer::add_qkv_proj(const ModelConfig& cfg, const InitContext& ctx) {
  const int64_t d = cfg.hidden_size, kd = cfg.key_dim(), vd = cfg.value_dim();
  q_proj = register_module("q_proj", std::make_shared<Linear>(d, kd, false, ctx));
  k_proj = register_module("k_proj", std::make_shared<Linear>(d, kd, false, ctx));
  v_proj = register_module("v_proj", std::make_shared<Linear>(d, vd, false, ctx));
}

void DeltaRuleMixer::add_short_convs(const ModelConfig& cfg, const InitContext& ctx) {
  if (!cfg.use_short_conv) return;
  const int64_t kd = cfg.key_dim(), vd = cfg.value_dim();
  q_conv1d = register_module("q_conv1d",
                             std::make_shared<ShortConv>(kd, cfg.conv_size, ctx, cfg.conv1d_impl));
  k_conv1d = register_module("k_conv1d",
                             std::make_shared<ShortConv>(kd, cfg.conv_size, ctx, cfg.conv1d_impl));
  v_conv1d = register_module("v_conv1d",
                             std::make_shared<ShortConv>(vd, cfg.conv_size, ctx, cfg.conv1d_impl));
}

Tensor DeltaRuleMixer::forward(const Tensor& x, const CuSeqlens& cu_seqlens) const {
  return run(x, cu_seqlens, nullptr);
}

DeltaRuleInputs DeltaRuleMixer::inputs(const Tensor& x, const CuSeqlens& cu,
                                       DeltaRuleState* state) const {
  GDN_CHECK(x.dim() == 3 && x.size(2) == hidden_size_, kind_, ": input ", shape_str(x.shape()),
            " must be [B, T, ", hidden_size_, "]");
  const DeltaRuleProjections p{q_proj.get(),   k_proj.get(),   v_proj.get(),   b_proj.get(),
                               q_conv1d.get(), k_conv1d.get(), v_conv1d.get(), num_heads_,
                               num_v_heads_,   head_k_dim_,    head_v_dim_,    allow_neg_eigval_};
  return delta_rule_inputs(p, x, cu, state);
}

Tensor DeltaRuleMixer::project_out(const Tensor& o) const {
  return o_proj->forward(ops::reshape(o, {o.size(0), o.size(1), num_v_heads_ * head_v_dim_}));
}

}  // namespace gdn::nn
