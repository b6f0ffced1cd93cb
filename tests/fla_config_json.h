// config.json as fla's save_pretrained writes it, for the tests that load fla's checkpoints.
#pragma once
#include <nlohmann/json.hpp>

#include "layers/config.h"

namespace gdn::test {

// config.json as transformers 5 writes it for fla 0.6.0's GatedDeltaNetConfig (every field, plus
// Hugging Face's own), for a model of these sizes, with `attn` as given (null: none).
inline nlohmann::json fla_config_json(const nn::ModelConfig& c,
                                      const nlohmann::json& attn = nullptr) {
  return {{"architectures", {"GatedDeltaNetForCausalLM"}},
          {"model_type", "gated_deltanet"},
          {"attn_mode", "chunk"},
          {"hidden_size", c.hidden_size},
          {"expand_v", c.expand_v},
          {"use_gate", c.use_gate},
          {"output_gate_activation", "swish"},
          {"use_short_conv", c.use_short_conv},
          {"conv_size", c.conv_size},
          {"head_dim", c.head_dim},
          {"num_heads", c.num_heads},
          {"num_v_heads", nullptr},
          {"max_position_embeddings", 2048},
          {"hidden_ratio", 4},
          {"intermediate_size", nullptr},
          {"hidden_act", "swish"},
          {"num_hidden_layers", c.num_hidden_layers},
          {"norm_eps", c.norm_eps},
          {"attn", attn},
          {"use_cache", true},
          {"pad_token_id", nullptr},
          {"bos_token_id", 1},
          {"eos_token_id", 2},
          {"tie_word_embeddings", c.tie_word_embeddings},
          {"initializer_range", 0.02},
          {"fuse_norm", true},
          {"fuse_swiglu", true},
          {"fuse_cross_entropy", true},
          {"fuse_linear_cross_entropy", false},
          {"use_l2warp", false},
          {"vocab_size", c.vocab_size},
          {"allow_neg_eigval", c.allow_neg_eigval},
          {"attnres_block_size", nullptr},
          {"dtype", "bfloat16"},
          {"transformers_version", "5.25.0"},
          {"output_hidden_states", false},
          {"return_dict", true}};
}

}  // namespace gdn::test
