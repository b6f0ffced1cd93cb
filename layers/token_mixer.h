// Token mixers as registered layer types. A block is pre-norm attention-then-MLP, and its
// "attention" (fla names it `attn` whatever it is) is a TokenMixer: the Gated DeltaNet layer is one
// entry of the table below, Kimi Delta Attention and softmax attention others. Each entry claims
// its layers from the config (claimed_layers: attention the layers of the `attn` spec); an entry
// that claims none is the own mixer of a model_type (gated_deltanet: Gated DeltaNet; kda: Kimi
// Delta Attention) and takes every other layer of such a model. A mixer is added in its own
// files plus one line in token_mixer.cpp, without touching the model, the block, checkpoint
// naming (parameters stay under model.layers.N.attn.*), the size check (which counts each
// entry's claimed layers) or the memory profile (which reads each entry's kernel ops).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "layers/config.h"
#include "layers/module.h"

namespace gdn::nn {

// What a mixer carries from one generation step to the next (each mixer derives its own).
struct MixerState {
  virtual ~MixerState() = default;
};
// One layer's generation state; null = fresh (the mixer creates it on first use).
using LayerState = std::unique_ptr<MixerState>;

// Packed sequences of an input [1, T, hidden]: fla's cu_seqlens, host offsets 0 = cu[0] < cu[1]
// < ... < cu[N] = T; sequence n is positions [cu[n], cu[n + 1]) and is mixed as if it were
// alone. Empty: each of the B rows is one sequence.
using CuSeqlens = std::vector<int64_t>;

class TokenMixer : public Module {
 public:
  // x [B, T, hidden] -> [B, T, hidden]; with cu_seqlens (B = 1) no token sees another sequence.
  virtual Tensor forward(const Tensor& x, const CuSeqlens& cu_seqlens) const = 0;
  Tensor forward(const Tensor& x) const { return forward(x, CuSeqlens{}); }
  // The same, continuing from `state` (updated in place): generation, one chunk of tokens at a
  // time.
  virtual Tensor forward_with_state(const Tensor& x, LayerState& state) const = 0;
};

struct TokenMixerType {
  const char* name;  // "gated_deltanet"
  // The layers this mixer takes, from the config (e.g. attention: the layers of model.attn);
  // null for a model's own mixer, which takes every layer no other entry claims.
  std::vector<int64_t> (*claimed_layers)(const ModelConfig& cfg);
  // The model_type whose own mixer this is (with claimed_layers null).
  ModelType own_of;
  // Layer `layer` of the model (a mixer may read per-layer settings, e.g. its `attn` entry).
  std::shared_ptr<TokenMixer> (*make)(const ModelConfig& cfg, int64_t layer,
                                      const InitContext& ctx);
  // Parameters of layer `layer`, by formula (tests check it against the built layer).
  int64_t (*num_parameters)(const ModelConfig& cfg, int64_t layer);
  // Training FLOPs (forward + backward) per token of layer `layer` at sequence length T (MFU).
  double (*train_flops_per_token)(const ModelConfig& cfg, int64_t layer, int64_t seq_len);
  // Names of the autograd ops whose saved tensors are the mixer's kernel residuals (memory
  // profile category `kernel_residuals`).
  std::vector<std::string> kernel_ops;
};

// Every registered mixer.
const std::vector<TokenMixerType>& token_mixer_types();
// By name; throws gdn::Error listing the known names.
const TokenMixerType& find_token_mixer(const std::string& name);
// The mixer type of layer `layer` of a model: the entry that claims it, else the model's own.
const TokenMixerType& token_mixer_of(const ModelConfig& cfg, int64_t layer);
// The model's own mixer: the entry of its model_type that claims no layers of its own.
const TokenMixerType& default_token_mixer(const ModelConfig& cfg);
// Whether autograd op `op` is some mixer's kernel.
bool is_mixer_kernel_op(const std::string& op);

}  // namespace gdn::nn
