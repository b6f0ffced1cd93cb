// The table of token mixers (layers/token_mixer.h). A new mixer adds its line here.
#include "layers/token_mixer.h"

#include <algorithm>

#include "layers/attention.h"
#include "layers/gated_deltanet.h"
#include "layers/kimi_delta_attention.h"

namespace gdn::nn {

const std::vector<TokenMixerType>& token_mixer_types() {
  static const std::vector<TokenMixerType> table = {
      {"gated_deltanet",
       nullptr,  // every layer that no other entry claims
       ModelType::gated_deltanet,
       &make_gated_deltanet,
       &gated_deltanet_num_parameters,
       &gated_deltanet_train_flops_per_token,
       {"gated_delta_rule", "ssd"}},
      {"kimi_delta_attention",
       nullptr,
       ModelType::kda,
       &make_kimi_delta_attention,
       &kimi_delta_attention_num_parameters,
       &kimi_delta_attention_train_flops_per_token,
       {"kimi_delta_rule"}},
      {"attention",
       &attention_layers,
       ModelType::gated_deltanet,  // unused: it claims its layers
       &make_attention,
       &attention_num_parameters,
       &attention_train_flops_per_token,
       {"attention"}},
  };
  return table;
}

const TokenMixerType& find_token_mixer(const std::string& name) {
  std::string known;
  for (const TokenMixerType& t : token_mixer_types()) {
    if (name == t.name) return t;
    known += (known.empty() ? "" : ", ") + std::string(t.name);
  }
  GDN_FAIL("unknown token mixer '", name, "' (known: ", known, ")");
}

const TokenMixerType& default_token_mixer(const ModelConfig& cfg) {
  for (const TokenMixerType& t : token_mixer_types())
    if (!t.claimed_layers && t.own_of == cfg.model_type) return t;
  GDN_FAIL("no token mixer takes the layers of a ", enum_name(cfg.model_type),
           " model that no other claims");
}

const TokenMixerType& token_mixer_of(const ModelConfig& cfg, int64_t layer) {
  for (const TokenMixerType& t : token_mixer_types())
    if (t.claimed_layers) {
      const std::vector<int64_t> mine = t.claimed_layers(cfg);
      if (std::find(mine.begin(), mine.end(), layer) != mine.end()) return t;
    }
  return default_token_mixer(cfg);
}

bool is_mixer_kernel_op(const std::string& op) {
  for (const TokenMixerType& t : token_mixer_types())
    if (std::find(t.kernel_ops.begin(), t.kernel_ops.end(), op) != t.kernel_ops.end()) return true;
  return false;
}

}  // namespace gdn::nn
