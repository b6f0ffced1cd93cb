// ModelConfig: derived sizes, validation, parameter count, config.json.
#include "layers/config.h"

#include <cmath>

#include "layers/token_mixer.h"
#include "src/core/error.h"

namespace gdn::nn {

int64_t ModelConfig::head_v_dim() const {
  return int64_t(std::llround(double(head_dim) * expand_v));
}

int64_t ModelConfig::mlp_intermediate_size() const {
  if (intermediate_size > 0) return intermediate_size;
  // fla GatedMLP: the multiple of 256 at or above 2/3 * hidden_ratio * hidden_size
  int64_t i = int64_t(double(hidden_size) * double(hidden_ratio) * 2.0 / 3.0);
  return 256 * ((i + 255) / 256);
}

void ModelConfig::validate() const {
  GDN_CHECK(hidden_size > 0 && num_hidden_layers >= 0 && num_heads > 0 && head_dim > 0,
            "model: hidden_size, num_heads, head_dim must be positive and num_hidden_layers >= 0 ",
            "(got hidden_size=", hidden_size, ", num_hidden_layers=", num_hidden_layers,
            ", num_heads=", num_heads, ", head_dim=", head_dim, ")");
  GDN_CHECK(v_heads() % num_heads == 0, "model.num_v_heads=", num_v_heads,
            " must be a multiple of num_heads=", num_heads);
  GDN_CHECK(std::abs(double(head_dim) * expand_v - double(head_v_dim())) < 1e-6 && head_v_dim() > 0,
            "model.expand_v=", expand_v, " times head_dim=", head_dim, " is not an integer");
  GDN_CHECK(!use_short_conv || conv_size >= 1, "model.conv_size must be >= 1, got ", conv_size);
  GDN_CHECK(vocab_size > 0, "model.vocab_size must be positive, got ", vocab_size);
  GDN_CHECK(hidden_act == "swish" || hidden_act == "silu", "model.hidden_act: only 'swish' is ",
            "supported, got '", hidden_act, "'");
  GDN_CHECK(norm_eps > 0, "model.norm_eps must be positive, got ", norm_eps);
  GDN_CHECK(chunk_size == 16 || chunk_size == 32 || chunk_size == 64,
            "model.chunk_size must be 16, 32 or 64, got ", chunk_size);
  GDN_CHECK(attn_mode == "chunk" || attn_mode == "fused_recurrent", "model.attn_mode: '", attn_mode,
            "' (fla knows chunk and fused_recurrent)");
  GDN_CHECK(EnumTable<gdr::Impl>(kModelKernels).parse(gdr::impl_name(kernel)), "model.kernel: '",
            gdr::impl_name(kernel), "' is not a Gated DeltaNet kernel (expected ",
            EnumTable<gdr::Impl>(kModelKernels).choices(), ")");
}

int64_t ModelConfig::num_parameters() const {
  const int64_t emb = vocab_size * hidden_size;
  const int64_t mlp = 3 * hidden_size * mlp_intermediate_size();
  int64_t n = emb + hidden_size + (tie_word_embeddings ? 0 : emb);  // + final norm, lm_head
  for (int64_t i = 0; i < num_hidden_layers; ++i)
    n += token_mixer_of(*this, i).num_parameters(*this) + mlp + 2 * hidden_size;  // + 2 norms
  return n;
}

nlohmann::json ModelConfig::to_hf_json() const {
  nlohmann::json j = {
      {"model_type", "gated_deltanet"},
      {"architectures", {"GatedDeltaNetForCausalLM"}},
      {"attn_mode", attn_mode},
      {"hidden_size", hidden_size},
      {"num_hidden_layers", num_hidden_layers},
      {"num_heads", num_heads},
      {"num_v_heads", num_v_heads > 0 ? nlohmann::json(num_v_heads) : nlohmann::json(nullptr)},
      {"head_dim", head_dim},
      {"expand_v", expand_v},
      {"conv_size", conv_size},
      {"use_short_conv", use_short_conv},
      {"use_gate", use_gate},
      {"allow_neg_eigval", allow_neg_eigval},
      {"hidden_ratio", hidden_ratio},
      {"intermediate_size",
       intermediate_size > 0 ? nlohmann::json(intermediate_size) : nlohmann::json(nullptr)},
      {"hidden_act", hidden_act},
      {"norm_eps", norm_eps},
      {"vocab_size", vocab_size},
      {"tie_word_embeddings", tie_word_embeddings},
      {"initializer_range", initializer_range},
      {"max_position_embeddings", max_position_embeddings},
      {"bos_token_id", bos_token_id},
      {"eos_token_id", eos_token_id},
      {"fuse_norm", fuse_norm},
      {"fuse_swiglu", fuse_swiglu},
      {"fuse_cross_entropy", fuse_cross_entropy},
      {"torch_dtype", "float32"},
      {"gdn",
       {{"kernel", gdr::impl_name(kernel)},
        {"chunk_size", chunk_size},
        {"residual", gdr::residual_name(residual)}}},
  };
  return j;
}

ModelConfig ModelConfig::from_hf_json(const nlohmann::json& j) {
  GDN_CHECK(j.value("model_type", "") == "gated_deltanet", "config.json: model_type is '",
            j.value("model_type", ""), "', expected 'gated_deltanet'");
  ModelConfig c;
  auto get = [&](const char* key, auto& field) {
    if (j.contains(key) && !j[key].is_null()) {
      try {
        j.at(key).get_to(field);
      } catch (const nlohmann::json::exception& e) {
        GDN_FAIL("config.json: field '", key, "': ", e.what());
      }
    }
  };
  get("attn_mode", c.attn_mode);
  get("hidden_size", c.hidden_size);
  get("num_hidden_layers", c.num_hidden_layers);
  get("num_heads", c.num_heads);
  get("num_v_heads", c.num_v_heads);
  get("head_dim", c.head_dim);
  get("expand_v", c.expand_v);
  get("conv_size", c.conv_size);
  get("use_short_conv", c.use_short_conv);
  get("use_gate", c.use_gate);
  get("allow_neg_eigval", c.allow_neg_eigval);
  get("hidden_ratio", c.hidden_ratio);
  get("intermediate_size", c.intermediate_size);
  get("hidden_act", c.hidden_act);
  get("norm_eps", c.norm_eps);
  get("vocab_size", c.vocab_size);
  get("tie_word_embeddings", c.tie_word_embeddings);
  get("initializer_range", c.initializer_range);
  get("max_position_embeddings", c.max_position_embeddings);
  get("bos_token_id", c.bos_token_id);
  get("eos_token_id", c.eos_token_id);
  get("fuse_norm", c.fuse_norm);
  get("fuse_swiglu", c.fuse_swiglu);
  get("fuse_cross_entropy", c.fuse_cross_entropy);
  if (j.contains("gdn")) {
    const auto& g = j["gdn"];
    auto get_enum = [&](const char* key, auto table, auto& field) {
      if (!g.contains(key)) return;
      const std::string v = g[key].is_string() ? g[key].get<std::string>() : g[key].dump();
      auto parsed = table.parse(v);
      GDN_CHECK(parsed, "config.json: gdn.", key, " is '", v, "' (expected ", table.choices(), ")");
      field = *parsed;
    };
    get_enum("kernel", EnumTable<gdr::Impl>(kModelKernels), c.kernel);
    if (g.contains("chunk_size")) g["chunk_size"].get_to(c.chunk_size);
    get_enum("residual", enum_table(gdr::Residual{}), c.residual);
  }
  c.validate();
  return c;
}

}  // namespace gdn::nn
