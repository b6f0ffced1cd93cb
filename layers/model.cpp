// Block, Backbone and CausalLM.
#include "layers/model.h"

#include "src/autograd/checkpoint.h"
#include "src/ops/linear_cross_entropy.h"

namespace gdn::nn {

Block::Block(const ModelConfig& cfg, int64_t layer, const InitContext& ctx) {
  attn_norm =
      register_module("attn_norm", std::make_shared<RMSNorm>(cfg.hidden_size, cfg.norm_eps, ctx));
  attn = register_module("attn", token_mixer_of(cfg, layer).make(cfg, layer, ctx));
  mlp_norm =
      register_module("mlp_norm", std::make_shared<RMSNorm>(cfg.hidden_size, cfg.norm_eps, ctx));
  mlp = register_module(
      "mlp", std::make_shared<GatedMLP>(cfg.hidden_size, cfg.mlp_intermediate_size(), ctx));
}

Tensor Block::forward(const Tensor& x, Checkpointing checkpointing, const CuSeqlens& cu) const {
  ModuleScope scope(*this);
  // The recompute runs in backward, after this call returns: the closures own a copy of cu.
  if (checkpointing == Checkpointing::block)
    return autograd::checkpoint(
        "checkpoint_block",
        [this, cu](const std::vector<Tensor>& in) {
          return std::vector<Tensor>{forward(in[0], Checkpointing::none, cu)};
        },
        {x})[0];
  Tensor mixed;
  if (checkpointing == Checkpointing::kernel)
    mixed = autograd::checkpoint(
        "checkpoint_attn",
        [this, cu](const std::vector<Tensor>& in) {
          return std::vector<Tensor>{attn->forward(attn_norm->forward(in[0]), cu)};
        },
        {x})[0];
  else
    mixed = attn->forward(attn_norm->forward(x), cu);
  auto [h, normed] = mlp_norm->forward_residual(x, mixed);  // h = x + mixed and its norm, fused
  return ops::add(h, mlp->forward(normed));
}

Tensor Block::forward_with_state(const Tensor& x, LayerState& state) const {
  ModuleScope scope(*this);
  auto [h, normed] =
      mlp_norm->forward_residual(x, attn->forward_with_state(attn_norm->forward(x), state));
  return ops::add(h, mlp->forward(normed));
}

Backbone::Backbone(const ModelConfig& cfg, const InitContext& ctx) {
  embeddings = register_module("embeddings",
                               std::make_shared<Embedding>(cfg.vocab_size, cfg.hidden_size, ctx));
  for (int64_t i = 0; i < cfg.num_hidden_layers; ++i)
    layers.push_back(
        register_module("layers." + std::to_string(i), std::make_shared<Block>(cfg, i, ctx)));
  norm = register_module("norm", std::make_shared<RMSNorm>(cfg.hidden_size, cfg.norm_eps, ctx));
}

CausalLM::CausalLM(const ModelConfig& c, const InitContext& ctx_in)
    : cfg(with_backend_overrides(c)) {
  cfg.validate();
  InitContext ctx = ctx_in;
  ctx.std = cfg.initializer_range;
  model = register_module("model", std::make_shared<Backbone>(cfg, ctx));
  if (!cfg.tie_word_embeddings)
    lm_head = register_module(
        "lm_head", std::make_shared<Linear>(cfg.hidden_size, cfg.vocab_size, false, ctx));
}

const Tensor& CausalLM::lm_head_weight() const {
  return lm_head ? lm_head->weight : model->embeddings->weight;
}

Tensor CausalLM::hidden(const Tensor& ids, const CuSeqlens& cu) const {
  GDN_CHECK(ids.dim() == 2, "CausalLM: token ids must be [B, T], got ", shape_str(ids.shape()));
  autograd::ScopeGuard scope("model");
  Tensor h = model->embeddings->forward(ids, compute_dtype);
  for (const auto& layer : model->layers) h = layer->forward(h, checkpointing, cu);
  return model->norm->forward(h);
}

Tensor CausalLM::logits(const Tensor& ids, const CuSeqlens& cu) const {
  Tensor h = hidden(ids, cu);
  autograd::ScopeGuard scope("lm_head");
  return ops::linear(h, ops::cast(lm_head_weight(), h.dtype()));
}

Tensor CausalLM::loss(const Tensor& ids, const Tensor& targets, const CuSeqlens& cu) const {
  GDN_CHECK(targets.shape() == ids.shape(), "CausalLM::loss: targets ", shape_str(targets.shape()),
            " and inputs ", shape_str(ids.shape()), " differ");
  Tensor h = hidden(ids, cu);
  autograd::ScopeGuard scope("loss");
  return ops::linear_cross_entropy(ops::reshape(h, {-1, cfg.hidden_size}), lm_head_weight(),
                                   ops::reshape(targets, {-1}), -100);
}

Tensor CausalLM::step(const Tensor& ids, std::vector<LayerState>& states) const {
  GDN_CHECK(states.size() == model->layers.size(), "CausalLM::step: ", states.size(),
            " states for ", model->layers.size(), " layers");
  autograd::NoGradGuard no_grad;
  Tensor h;
  {
    autograd::ScopeGuard scope("model");
    h = model->embeddings->forward(ids, compute_dtype);
    for (size_t i = 0; i < states.size(); ++i)
      h = model->layers[i]->forward_with_state(h, states[i]);
    h = model->norm->forward(h);
  }
  Tensor last = ops::slice(h, 1, h.size(1) - 1, h.size(1));
  return ops::linear(last, ops::cast(lm_head_weight(), last.dtype()));
}

}  // namespace gdn::nn
