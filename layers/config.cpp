// ModelConfig: derived sizes, validation, parameter count, config.json.
//
// fla 0.6.0's GatedDeltaNetConfig (configuration_gated_deltanet.py in fla's models/gated_deltanet),
// field by field, and what gdn does with it in config.json:
//   computed as fla computes it:
//     hidden_size, num_hidden_layers, num_heads, num_v_heads (null = num_heads), head_dim,
//     expand_v, conv_size, use_short_conv, use_gate, allow_neg_eigval, hidden_ratio (null = 4),
//     intermediate_size (null = 256-rounded 2/3 hidden_ratio hidden_size), hidden_act (swish;
//     silu, the same function, is accepted too), norm_eps, vocab_size, tie_word_embeddings,
//     output_gate_activation (swish | silu | sigmoid: the gate of o_norm, fla's FusedRMSNormGated),
//     attn (null, a dict or a list of dicts: the layers that are softmax attention, with their
//     num_heads, num_kv_heads, qkv_bias, window_size, rope_theta; read and checked as fla's
//     parse_attention_config does, in layers/attention_config.cpp; a key fla does not know is
//     refused, naming it)
//   kept, no effect on the math:
//     attn_mode (chunk | fused_recurrent: fla's kernel choice), max_position_embeddings (read
//     only by attention layers), bos_token_id, eos_token_id (the tokenizer's; null = none; a list
//     keeps its first id), initializer_range (init only), use_cache, fuse_norm, fuse_swiglu,
//     fuse_cross_entropy, fuse_linear_cross_entropy (fused kernels of the same math; both
//     cross-entropy flags true is refused, as fla refuses it)
//   refused unless at fla's default, naming the field:
//     attnres_block_size (null; attention residuals add parameters and reroute the residuals),
//     use_l2warp (false; L2Wrap adds a max-logit penalty to the gradient),
//     pad_token_id (null; the embedding's padding_idx row gets no gradient in fla)
//
// fla 0.6.0's KDAConfig (configuration_kda.py in fla's models/kda), model_type kda: the same fields
// (its own defaults: kda_defaults()) except use_gate and output_gate_activation (KDA's output gate
// is always sigmoid(g_proj x)) and fuse_linear_cross_entropy, plus
//   computed as fla computes it:
//     safe_gate (true needs lower_bound, as fla requires; it starts A_log at 0), lower_bound
//     (null: g = -exp(A_log) softplus(f + dt_bias); a number: lower_bound sigmoid(exp(A_log)
//     (f + dt_bias)))
//
//   Hugging Face's own fields (model_type, architectures, transformers_version, dtype /
//   torch_dtype, output_hidden_states, ...): accepted, no effect; quantization_config is refused
//   (the weights would not be plain floats). Keys nobody knows are ignored, as fla ignores them.
#include "layers/config.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <variant>

#include "layers/token_mixer.h"
#include "src/core/error.h"

namespace gdn::nn {

namespace {

std::string show_number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

}  // namespace

namespace {

// The config.json fields read and written as they are (fla's name is the member's), in the order
// they are read; the rest (token ids, family-only fields, attn, the gdn section) on their own.
struct PlainField {
  const char* key;
  std::variant<int64_t ModelConfig::*, double ModelConfig::*, bool ModelConfig::*,
               std::string ModelConfig::*>
      member;
  bool null_unless_positive = false;  // 0 is fla's None: written null, read as given
  bool gated_deltanet_only = false;   // not KDAConfig's
};
const PlainField kPlainFields[] = {
    {"attn_mode", &ModelConfig::attn_mode},
    {"hidden_size", &ModelConfig::hidden_size},
    {"num_hidden_layers", &ModelConfig::num_hidden_layers},
    {"num_heads", &ModelConfig::num_heads},
    {"num_v_heads", &ModelConfig::num_v_heads, true},
    {"head_dim", &ModelConfig::head_dim},
    {"expand_v", &ModelConfig::expand_v},
    {"conv_size", &ModelConfig::conv_size},
    {"use_short_conv", &ModelConfig::use_short_conv},
    {"use_gate", &ModelConfig::use_gate, false, true},
    {"allow_neg_eigval", &ModelConfig::allow_neg_eigval},
    {"hidden_ratio", &ModelConfig::hidden_ratio},
    {"intermediate_size", &ModelConfig::intermediate_size, true},
    {"hidden_act", &ModelConfig::hidden_act},
    {"norm_eps", &ModelConfig::norm_eps},
    {"vocab_size", &ModelConfig::vocab_size},
    {"tie_word_embeddings", &ModelConfig::tie_word_embeddings},
    {"initializer_range", &ModelConfig::initializer_range},
    {"max_position_embeddings", &ModelConfig::max_position_embeddings},
    {"fuse_norm", &ModelConfig::fuse_norm},
    {"fuse_swiglu", &ModelConfig::fuse_swiglu},
    {"fuse_cross_entropy", &ModelConfig::fuse_cross_entropy}};

}  // namespace

int64_t ModelConfig::head_v_dim() const {
  return int64_t(std::llround(double(head_dim) * expand_v));
}

int64_t ModelConfig::kernel_chunk(Device device) const {
  if (chunk_size > 0) return chunk_size;
  if (is_kda()) return kda::kAutoChunk;
  return gdr::auto_chunk(device.is_cuda(), kernel, head_dim, head_v_dim());
}

int64_t ModelConfig::mlp_intermediate_size() const {
  if (intermediate_size > 0) return intermediate_size;
  // fla GatedMLP: the multiple of 256 at or above 2/3 * hidden_ratio * hidden_size
  int64_t i = int64_t(double(hidden_size) * double(hidden_ratio) * 2.0 / 3.0);
  return 256 * ((i + 255) / 256);
}

ModelConfig ModelConfig::kda_defaults() {
  ModelConfig c;
  c.model_type = ModelType::kda;
  c.num_hidden_layers = 24;
  c.num_heads = 16;
  c.head_dim = 128;
  c.expand_v = 1.0;
  return c;
}

namespace {

// What only one of the two families has, checked against the model_type.
void validate_family(const ModelConfig& c) {
  if (!c.is_kda()) {
    GDN_CHECK(!c.safe_gate && !c.lower_bound, "model.safe_gate and model.lower_bound are ",
              "KDAConfig's (model.model_type: kda); a Gated DeltaNet model has neither");
    return;
  }
  GDN_CHECK(c.kernel == gdr::Impl::recurrent || c.kernel == gdr::Impl::chunked, "model.kernel: '",
            gdr::impl_name(c.kernel), "' has no Kimi Delta Attention kernel (expected recurrent ",
            "or chunked)");
  GDN_CHECK(c.use_gate && c.output_gate_activation == GateActivation::swish,
            "model.use_gate and model.output_gate_activation are GatedDeltaNetConfig's: a KDA "
            "layer always gates its output with sigmoid(g_proj x) (leave them out)");
  GDN_CHECK(!c.safe_gate || c.lower_bound, "model.safe_gate: true needs model.lower_bound ",
            "(fla recommends -5)");
  GDN_CHECK(!c.lower_bound || (std::isfinite(*c.lower_bound) && *c.lower_bound < 0),
            "model.lower_bound must be a negative number (a log decay), got ",
            c.lower_bound ? show_number(*c.lower_bound) : "null");
}

}  // namespace

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
  GDN_CHECK(chunk_size == 0 || chunk_size == 16 || chunk_size == 32 || chunk_size == 64,
            "model.chunk_size must be 0 (the device's choice), 16, 32 or 64, got ", chunk_size);
  for (const auto& [key, v] :
       {std::pair<const char*, int64_t>{"fused_vt", fused_vt}, {"fused_sub", fused_sub}})
    GDN_CHECK(v == 0 || v == 16 || v == 32 || v == 64, "model.", key,
              " must be 0 (the plan's choice), 16, 32 or 64, got ", v);
  GDN_CHECK(attn_mode == "chunk" || attn_mode == "fused_recurrent", "model.attn_mode: '", attn_mode,
            "' (fla knows chunk and fused_recurrent)");
  GDN_CHECK(EnumTable<gdr::Impl>(kModelKernels).parse(gdr::impl_name(kernel)), "model.kernel: '",
            gdr::impl_name(kernel), "' is not a Gated DeltaNet kernel (expected ",
            EnumTable<gdr::Impl>(kModelKernels).choices(), ")");
  check_attention(*this, "model.attn",
                  [](const std::string& path, const AttentionSpot&) { return path; });
  validate_family(*this);
}

int64_t ModelConfig::num_parameters() const {
  const int64_t emb = vocab_size * hidden_size;
  const int64_t mlp = 3 * hidden_size * mlp_intermediate_size();
  int64_t n = emb + hidden_size + (tie_word_embeddings ? 0 : emb);  // + final norm, lm_head
  for (int64_t i = 0; i < num_hidden_layers; ++i)
    n += token_mixer_of(*this, i).num_parameters(*this, i) + mlp + 2 * hidden_size;  // + 2 norms
  return n;
}

nlohmann::json ModelConfig::to_hf_json() const {
  nlohmann::json j = {
      {"model_type", enum_name(model_type)},
      {"architectures", {is_kda() ? "KDAForCausalLM" : "GatedDeltaNetForCausalLM"}},
      {"bos_token_id", bos_token_id >= 0 ? nlohmann::json(bos_token_id) : nlohmann::json(nullptr)},
      {"eos_token_id", eos_token_id >= 0 ? nlohmann::json(eos_token_id) : nlohmann::json(nullptr)},
      {"pad_token_id", nullptr},
      {"fuse_linear_cross_entropy", false},
      {"use_l2warp", false},
      {"use_cache", true},
      {"attn", attention_json(*this)},
      {"attnres_block_size", nullptr},
      {"torch_dtype", "float32"},
      {"gdn",
       {{"kernel", gdr::impl_name(kernel)},
        {"chunk_size", chunk_size},
        {"residual", gdr::residual_name(residual)},
        {"attention_impl", enum_name(attention_impl)},
        {"conv1d_impl", enum_name(conv1d_impl)},
        {"fused_vt", fused_vt},
        {"fused_sub", fused_sub}}},
  };
  for (const PlainField& f : kPlainFields) {
    if (f.gated_deltanet_only && is_kda()) continue;
    std::visit([&](auto member) { j[f.key] = this->*member; }, f.member);
    if (f.null_unless_positive && j[f.key] <= 0) j[f.key] = nullptr;
  }
  if (is_kda()) {  // KDAConfig has no use_gate, output gate choice or fuse_linear_cross_entropy
    j.erase("fuse_linear_cross_entropy");
    j["safe_gate"] = safe_gate;
    j["lower_bound"] = lower_bound ? nlohmann::json(*lower_bound) : nlohmann::json(nullptr);
  } else {
    j["output_gate_activation"] = enum_name(output_gate_activation);
  }
  return j;
}

namespace {

// Refuses, naming the field, what fla would compute and gdn would not (the table at the top).
void refuse_unsupported_fields(const nlohmann::json& j) {
  auto is_set = [&](const char* key) { return j.contains(key) && !j[key].is_null(); };
  GDN_CHECK(!is_set("attnres_block_size"), "config.json: field 'attnres_block_size' is ",
            j.value("attnres_block_size", nlohmann::json()).dump(),
            ": attention residuals (fla's AttnRes) are not supported (must be null)");
  GDN_CHECK(!is_set("use_l2warp") || j["use_l2warp"] == false,
            "config.json: field 'use_l2warp' is ", j.value("use_l2warp", nlohmann::json()).dump(),
            ": fla's L2Wrap adds a max-logit penalty to the gradient, which gdn does not compute ",
            "(must be false)");
  GDN_CHECK(!is_set("pad_token_id"), "config.json: field 'pad_token_id' is ",
            j.value("pad_token_id", nlohmann::json()).dump(),
            ": fla's embedding gives that row no gradient (padding_idx), which gdn does not do ",
            "(must be null)");
  GDN_CHECK(!is_set("quantization_config"),
            "config.json: field 'quantization_config' is set: quantized weights are not supported");
  // fla's defaults: fuse_cross_entropy true, fuse_linear_cross_entropy false.
  auto is_true = [&](const char* key, bool dflt) { return is_set(key) ? j[key] == true : dflt; };
  GDN_CHECK(!(is_true("fuse_cross_entropy", true) && is_true("fuse_linear_cross_entropy", false)),
            "config.json: fields 'fuse_cross_entropy' and 'fuse_linear_cross_entropy' are both ",
            "true, which fla refuses");
}

// A token id field: an integer, null (none: -1) or a list (its first id).
int64_t token_id(const nlohmann::json& v, const char* key) {
  if (v.is_null()) return -1;
  if (v.is_array()) return v.empty() ? -1 : token_id(v[0], key);
  GDN_CHECK(v.is_number_integer(), "config.json: field '", key,
            "' must be an integer or null, got ", v.dump());
  return v.get<int64_t>();
}

std::string show(double v) {
  return show_number(v);
}

// Which layers are attention, with which settings (defaults resolved): "none", or groups
// "layers [3, 7]: num_heads=4, ..." in the order of their first layer. How the layers were
// split into entries, and in which order, does not change the model.
std::string attention_layout(const ModelConfig& c) {
  std::map<std::string, std::vector<int64_t>> layers_of;
  for (const AttentionConfig& a : c.attn) {
    if (a.layers.empty()) continue;  // fla accepts an entry of no layers: it changes nothing
    const std::string settings = str_cat(
        "num_heads=", a.num_heads, ", num_kv_heads=", a.kv_heads(),
        ", qkv_bias=", a.qkv_bias ? "true" : "false",
        ", window_size=", a.window_size > 0 ? std::to_string(a.window_size) : std::string("null"),
        ", rope_theta=", show(a.rope_theta));
    auto& layers = layers_of[settings];
    layers.insert(layers.end(), a.layers.begin(), a.layers.end());
  }
  std::vector<std::pair<std::vector<int64_t>, std::string>> groups;
  for (auto& [settings, layers] : layers_of) {
    std::sort(layers.begin(), layers.end());
    groups.emplace_back(layers, settings);
  }
  std::sort(groups.begin(), groups.end());
  std::string out;
  for (const auto& [layers, settings] : groups) {
    std::string list;
    for (int64_t l : layers) list += (list.empty() ? "" : ", ") + std::to_string(l);
    out += str_cat(out.empty() ? "" : "; ", "layers [", list, "]: ", settings);
  }
  return out.empty() ? "none" : out;
}

}  // namespace

ModelConfig ModelConfig::from_hf_json(const nlohmann::json& j) {
  const std::string type = j.contains("model_type") && j["model_type"].is_string()
                               ? j["model_type"].get<std::string>()
                               : std::string();
  const auto family = enum_table(ModelType{}).parse(type);
  GDN_CHECK(family, "config.json: model_type is '", type, "', expected ",
            enum_table(ModelType{}).choices());
  ModelConfig c = *family == ModelType::kda ? kda_defaults() : ModelConfig{};
  auto get = [&](const char* key, auto& field) {
    if (j.contains(key) && !j[key].is_null()) {
      try {
        j.at(key).get_to(field);
      } catch (const nlohmann::json::exception& e) {
        GDN_FAIL("config.json: field '", key, "': ", e.what());
      }
    }
  };
  for (const PlainField& f : kPlainFields)
    if (!(f.gated_deltanet_only && c.is_kda()))
      std::visit([&](auto member) { get(f.key, c.*member); }, f.member);
  if (j.contains("bos_token_id")) c.bos_token_id = token_id(j["bos_token_id"], "bos_token_id");
  if (j.contains("eos_token_id")) c.eos_token_id = token_id(j["eos_token_id"], "eos_token_id");
  if (c.is_kda()) {
    get("safe_gate", c.safe_gate);
    if (j.contains("lower_bound") && !j["lower_bound"].is_null()) {
      GDN_CHECK(j["lower_bound"].is_number(), "config.json: field 'lower_bound' must be a number ",
                "or null, got ", j["lower_bound"].dump());
      c.lower_bound = j["lower_bound"].get<double>();
    }
  }
  if (!c.is_kda() && j.contains("output_gate_activation") &&
      !j["output_gate_activation"].is_null()) {
    const auto& v = j["output_gate_activation"];
    const auto parsed =
        v.is_string() ? enum_table(GateActivation{}).parse(v.get<std::string>()) : std::nullopt;
    GDN_CHECK(parsed, "config.json: field 'output_gate_activation' is ", v.dump(), " (expected ",
              enum_table(GateActivation{}).choices(), ")");
    c.output_gate_activation = *parsed;
  }
  refuse_unsupported_fields(j);
  // After the sizes: attn's checks read num_hidden_layers and hidden_size.
  read_attention(j.contains("attn") ? j["attn"] : nlohmann::json(), c, "attn",
                 [](const std::string& path, const AttentionSpot&) {
                   return "config.json: field '" + path + "'";
                 });
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
    if (g.contains("chunk_size")) {
      GDN_CHECK(g["chunk_size"].is_number_integer(), "config.json: gdn.chunk_size must be an ",
                "integer, got ", g["chunk_size"].dump());
      g["chunk_size"].get_to(c.chunk_size);
    }
    get_enum("residual", enum_table(gdr::Residual{}), c.residual);
    get_enum("attention_impl", enum_table(attn::Impl{}), c.attention_impl);
    get_enum("conv1d_impl", enum_table(cuda::Conv1dImpl{}), c.conv1d_impl);
    for (const auto& [key, field] :
         {std::pair<const char*, int64_t*>{"fused_vt", &c.fused_vt}, {"fused_sub", &c.fused_sub}})
      if (g.contains(key)) {
        GDN_CHECK(g[key].is_number_integer(), "config.json: gdn.", key, " must be an integer, got ",
                  g[key].dump());
        g[key].get_to(*field);
      }
  }
  c.validate();
  return c;
}

std::vector<std::string> model_differences(const ModelConfig& a, const ModelConfig& b) {
  std::vector<std::string> out;
  auto differ = [&](const char* name, const std::string& va, const std::string& vb) {
    if (va != vb) out.push_back(str_cat(name, " (", va, " vs ", vb, ")"));
  };
  auto num = [](int64_t v) { return std::to_string(v); };
  auto flag = [](bool v) { return std::string(v ? "true" : "false"); };
  // swish and silu are one function: compare what is computed.
  auto act = [](const std::string& s) { return s == "silu" ? std::string("swish") : s; };
  auto gate = [](const ModelConfig& c) {
    if (!c.use_gate) return std::string("none (use_gate false)");
    return std::string(c.output_gate_activation == GateActivation::sigmoid ? "sigmoid" : "swish");
  };
  differ("model_type", enum_name(a.model_type), enum_name(b.model_type));
  differ("lower_bound", a.lower_bound ? show(*a.lower_bound) : "null",
         b.lower_bound ? show(*b.lower_bound) : "null");
  differ("hidden_size", num(a.hidden_size), num(b.hidden_size));
  differ("num_hidden_layers", num(a.num_hidden_layers), num(b.num_hidden_layers));
  differ("num_heads", num(a.num_heads), num(b.num_heads));
  differ("num_v_heads", num(a.v_heads()), num(b.v_heads()));
  differ("head_dim", num(a.head_dim), num(b.head_dim));
  differ("expand_v", show(a.expand_v), show(b.expand_v));
  differ("use_short_conv", flag(a.use_short_conv), flag(b.use_short_conv));
  if (a.use_short_conv && b.use_short_conv) differ("conv_size", num(a.conv_size), num(b.conv_size));
  differ("use_gate", flag(a.use_gate), flag(b.use_gate));
  if (a.use_gate && b.use_gate) differ("output_gate_activation", gate(a), gate(b));
  differ("allow_neg_eigval", flag(a.allow_neg_eigval), flag(b.allow_neg_eigval));
  differ("intermediate_size", num(a.mlp_intermediate_size()), num(b.mlp_intermediate_size()));
  differ("hidden_act", act(a.hidden_act), act(b.hidden_act));
  differ("norm_eps", show(a.norm_eps), show(b.norm_eps));
  differ("vocab_size", num(a.vocab_size), num(b.vocab_size));
  differ("tie_word_embeddings", flag(a.tie_word_embeddings), flag(b.tie_word_embeddings));
  differ("attn", attention_layout(a), attention_layout(b));
  return out;
}

}  // namespace gdn::nn

namespace gdn::nn {

namespace {

// One variable: its parsed value, or nullopt when unset or empty; a bad value throws naming it.
template <typename E>
std::optional<E> env_enum(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) return std::nullopt;
  const auto parsed = enum_table(E{}).parse(v);
  GDN_CHECK(parsed, name, "='", v, "' is not one of ", enum_table(E{}).choices());
  return parsed;
}

std::optional<int64_t> env_tile(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) return std::nullopt;
  const std::string s = v;
  GDN_CHECK(s == "0" || s == "16" || s == "32" || s == "64", name, "='", s,
            "' is not one of 0, 16, 32 or 64");
  return std::stoll(s);
}

BackendOverrides read_backend_overrides() {
  BackendOverrides o;
  o.attention = env_enum<attn::Impl>("GDN_ATTENTION");
  o.conv1d = env_enum<cuda::Conv1dImpl>("GDN_CONV1D");
  o.fused_vt = env_tile("GDN_FUSED_VT");
  o.fused_sub = env_tile("GDN_FUSED_SUB");
  std::string said;
  if (o.attention) said += std::string(" GDN_ATTENTION=") + enum_name(*o.attention);
  if (o.conv1d) said += std::string(" GDN_CONV1D=") + enum_name(*o.conv1d);
  if (o.fused_vt) said += " GDN_FUSED_VT=" + std::to_string(*o.fused_vt);
  if (o.fused_sub) said += " GDN_FUSED_SUB=" + std::to_string(*o.fused_sub);
  if (!said.empty())
    std::fprintf(stderr, "gdn: backends from the environment (over the model keys):%s\n",
                 said.c_str());
  return o;
}

}  // namespace

const BackendOverrides& backend_overrides() {
  static const BackendOverrides o = read_backend_overrides();  // once, thread-safe
  return o;
}

ModelConfig with_backend_overrides(ModelConfig c) {
  const BackendOverrides& o = backend_overrides();
  if (o.attention) c.attention_impl = *o.attention;
  if (o.conv1d) c.conv1d_impl = *o.conv1d;
  if (o.fused_vt) c.fused_vt = *o.fused_vt;
  if (o.fused_sub) c.fused_sub = *o.fused_sub;
  return c;
}

}  // namespace gdn::nn
