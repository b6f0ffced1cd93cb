// Softmax attention as a token mixer (fla's fla.layers.attn.Attention, same parameter names),
// for the layers a model's `attn` entries name (hybrid models). Input x [B, T, d], head_dim
// D = d / H, HKV key/value heads (grouped-query attention: query head h reads kv head
// h / (H / HKV)):
//   q = q_proj x [B, T, H, D],  k = k_proj x, v = v_proj x [B, T, HKV, D]  (biases: qkv_bias)
//   q, k = rope(q), rope(k)     rotate-half, positions from 0 at each sequence start
//   o    = causal softmax attention(q, k, v), scale D^-1/2, window w: itself and w - 1 before
//   out  = o_proj o             (no bias)
// fla's qk_norm is not in its AttentionConfig (off), so there is none here.
// Generation keeps the rotated keys and values seen so far (the last w - 1 with a window).
// A token mixer (layers/token_mixer.h) named "attention".
#pragma once
#include "layers/linear.h"
#include "layers/token_mixer.h"

namespace gdn::nn {

// Generation state of one attention layer: the KV cache.
struct AttentionState : MixerState {
  Tensor k, v;           // [B, P, HKV, D] rotated keys and values of the last P tokens (detached)
  int64_t position = 0;  // tokens seen so far (the next token's rotary position)
};

class Attention : public TokenMixer {
 public:
  Attention(const ModelConfig& cfg, const AttentionConfig& a, const InitContext& ctx);
  using TokenMixer::forward;
  Tensor forward(const Tensor& x, const CuSeqlens& cu_seqlens) const override;
  Tensor forward_with_state(const Tensor& x, LayerState& state) const override;

  std::shared_ptr<Linear> q_proj, k_proj, v_proj, o_proj;

 private:
  // q [B, T, H, D], k, v [B, T, HKV, D] of x, q and k rotated from `offset` (or per sequence).
  void project(const Tensor& x, int64_t offset, const CuSeqlens& cu, Tensor& q, Tensor& k,
               Tensor& v) const;
  Tensor output(const Tensor& o) const;  // o_proj of o [B, T, H, D]

  int64_t hidden_size_, num_heads_, num_kv_heads_, head_dim_, window_;
  double rope_theta_;
  attn::Impl impl_;  // model.attention_impl: the CUDA kernel
};

// The registry's entry points (layers/token_mixer.cpp); layer `layer` must be in an attn entry.
// The layers of every attn entry: the layers attention claims.
std::vector<int64_t> attention_layers(const ModelConfig& cfg);
std::shared_ptr<TokenMixer> make_attention(const ModelConfig& cfg, int64_t layer,
                                           const InitContext& ctx);
int64_t attention_num_parameters(const ModelConfig& cfg, int64_t layer);
double attention_train_flops_per_token(const ModelConfig& cfg, int64_t layer, int64_t seq_len);

}  // namespace gdn::nn
