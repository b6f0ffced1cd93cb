// Block (pre-norm: h = x + attn(attn_norm x); h = h + mlp(mlp_norm h)) and CausalLM
// (embeddings, blocks, final norm, lm_head or tied embeddings): fla's
// GatedDeltaNetForCausalLM with the same parameter names.
#pragma once
#include <vector>

#include "layers/embedding.h"
#include "layers/linear.h"
#include "layers/mlp.h"
#include "layers/norm.h"
#include "layers/token_mixer.h"

namespace gdn::nn {

class Block : public Module {
 public:
  // Block `layer` of the model, with the token mixer the config gives that layer.
  Block(const ModelConfig& cfg, int64_t layer, const InitContext& ctx);
  // cu_seqlens: packed sequences of a [1, T, d] input (layers/token_mixer.h), for the mixer.
  Tensor forward(const Tensor& x, Checkpointing checkpointing = Checkpointing::none,
                 const CuSeqlens& cu_seqlens = {}) const;
  Tensor forward_with_state(const Tensor& x, LayerState& state) const;
  std::shared_ptr<RMSNorm> attn_norm, mlp_norm;
  std::shared_ptr<TokenMixer> attn;  // fla's name for the mixer, whatever its type
  std::shared_ptr<GatedMLP> mlp;
};

// The backbone, named "model" inside CausalLM.
class Backbone : public Module {
 public:
  Backbone(const ModelConfig& cfg, const InitContext& ctx);
  std::shared_ptr<Embedding> embeddings;
  std::vector<std::shared_ptr<Block>> layers;
  std::shared_ptr<RMSNorm> norm;
};

class CausalLM : public Module {
 public:
  // Parameters are created on ctx.device in ctx.dtype, initialised from ctx.gen.
  CausalLM(const ModelConfig& cfg, const InitContext& ctx);

  // Final normed hidden states [B, T, d] of ids [B, T] (int32/int64), in compute_dtype. With
  // cu_seqlens (packed sequences: B = 1, host offsets 0 = cu[0] < ... < cu[N] = T; fla's
  // convention) every sequence is computed as if alone.
  Tensor hidden(const Tensor& ids, const CuSeqlens& cu_seqlens = {}) const;
  // Logits [B, T, vocab] (compute dtype).
  Tensor logits(const Tensor& ids, const CuSeqlens& cu_seqlens = {}) const;
  // Mean next-token cross-entropy of the logits against targets [B, T] over the targets other
  // than ignore_index -100, through linear_cross_entropy: the full fp32 logits are never
  // materialised. cu_seqlens does not mask: a target across a boundary is the caller's to mask.
  Tensor loss(const Tensor& ids, const Tensor& targets, const CuSeqlens& cu_seqlens = {}) const;
  // Logits of the last position given a generation state per layer (null entries start fresh).
  Tensor step(const Tensor& ids, std::vector<LayerState>& states) const;
  const Tensor& lm_head_weight() const;

  ModelConfig cfg;
  DType compute_dtype = DType::float32;  // activations; parameters stay in their own dtype
  Checkpointing checkpointing = Checkpointing::none;
  std::shared_ptr<Backbone> model;
  std::shared_ptr<Linear> lm_head;  // null when tied
};

}  // namespace gdn::nn
