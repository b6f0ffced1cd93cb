// The model configuration: flash-linear-attention's GatedDeltaNetConfig and KDAConfig field names
// (so config.json round-trips with fla / Hugging Face), plus gdn's kernel choice. Every field of
// fla 0.6.0's two configs is either computed or refused by name (the table is in
// layers/config.cpp).
#pragma once
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include <optional>

#include "kernels/cuda/attention_cudnn.h"
#include "kernels/cuda/conv_cudnn.h"
#include "kernels/gated_delta_rule.h"
#include "kernels/kda.h"
#include "src/core/device.h"

namespace gdn::nn {

// The implementations that can back a Gated DeltaNet layer (ssd is a benchmark baseline).
inline constexpr EnumEntry<gdr::Impl> kModelKernels[] = {{gdr::Impl::recurrent, "recurrent"},
                                                         {gdr::Impl::chunked, "chunked"},
                                                         {gdr::Impl::fused, "fused"}};

// Activation checkpointing: none, block (each block recomputed in backward, only its input
// kept) or kernel (the token-mixing half of each block recomputed: projections, convs, gates
// and the mixer's kernel; the MLP's activations kept).
enum class Checkpointing { none, block, kernel };
inline constexpr EnumEntry<Checkpointing> kCheckpointingNames[] = {
    {Checkpointing::none, "none"},
    {Checkpointing::block, "block"},
    {Checkpointing::kernel, "kernel"}};
inline EnumTable<Checkpointing> enum_table(Checkpointing) {
  return kCheckpointingNames;
}

// The output gate of the Gated DeltaNet layer (fla's output_gate_activation, applied by its
// FusedRMSNormGated): rmsnorm(o) * w * act(g_proj x). swish and silu are the same function.
enum class GateActivation { swish, silu, sigmoid };
inline constexpr EnumEntry<GateActivation> kGateActivationNames[] = {
    {GateActivation::swish, "swish"},
    {GateActivation::silu, "silu"},
    {GateActivation::sigmoid, "sigmoid"}};
inline EnumTable<GateActivation> enum_table(GateActivation) {
  return kGateActivationNames;
}

// The model family, fla's model_type: gated_deltanet (GatedDeltaNetForCausalLM, Gated DeltaNet
// layers) or kda (KDAForCausalLM, Kimi Delta Attention layers: layers/kimi_delta_attention.h).
// Either may have softmax attention layers (`attn`).
enum class ModelType { gated_deltanet, kda };
inline constexpr EnumEntry<ModelType> kModelTypeNames[] = {
    {ModelType::gated_deltanet, "gated_deltanet"}, {ModelType::kda, "kda"}};
inline EnumTable<ModelType> enum_table(ModelType) {
  return kModelTypeNames;
}

// One entry of fla's `attn` (GatedDeltaNetConfig.attn: a dict, or a list of dicts): these layers
// are softmax attention (fla.layers.attn.Attention) instead of Gated DeltaNet. Defaults as fla's
// parse_attention_config fills them.
struct AttentionConfig {
  std::vector<int64_t> layers;  // layer indices, each in [0, num_hidden_layers), no layer twice
  int64_t num_heads = 0;        // required, > 0; hidden_size divisible by it
  int64_t num_kv_heads = 0;     // 0 = None: num_heads; num_heads divisible by it
  bool qkv_bias = false;        // biases on q_proj, k_proj, v_proj (o_proj never has one)
  int64_t window_size = 0;      // 0 = None: full causal; w: a query sees itself and w - 1 before
  double rope_theta = 10000.0;  // rotary base: inverse frequencies rope_theta^(-2i / head_dim)

  int64_t kv_heads() const { return num_kv_heads > 0 ? num_kv_heads : num_heads; }
  int64_t head_dim(int64_t hidden_size) const { return hidden_size / num_heads; }
};

struct ModelConfig {
  ModelType model_type = ModelType::gated_deltanet;
  // fla GatedDeltaNetConfig fields (same names and defaults; kda_defaults() gives KDAConfig's).
  int64_t hidden_size = 2048;
  int64_t num_hidden_layers = 21;
  int64_t num_heads = 6;
  int64_t num_v_heads = 0;  // 0 = None: same as num_heads
  int64_t head_dim = 256;
  double expand_v = 2.0;
  int64_t conv_size = 4;
  bool use_short_conv = true;
  bool use_gate = true;
  bool allow_neg_eigval = false;
  int64_t hidden_ratio = 4;
  int64_t intermediate_size = 0;  // 0 = None: 256-rounded 2/3 * hidden_ratio * hidden_size
  std::string hidden_act = "swish";
  double norm_eps = 1e-6;
  int64_t vocab_size = 32000;
  bool tie_word_embeddings = false;
  double initializer_range = 0.02;
  int64_t max_position_embeddings = 2048;
  int64_t bos_token_id = 1;  // -1 = None (no such token); no effect on the math
  int64_t eos_token_id = 2;  // -1 = None
  std::string attn_mode = "chunk";
  bool fuse_norm = true, fuse_swiglu = true, fuse_cross_entropy = true;
  GateActivation output_gate_activation = GateActivation::swish;  // with use_gate
  // KDAConfig only: the gate's form. lower_bound set: g = lower_bound * sigmoid(exp(A_log) (f +
  // dt_bias)) in [lower_bound, 0), else -exp(A_log) softplus(f + dt_bias); safe_gate (needs
  // lower_bound) starts A_log at 0 and lets fla's kernels assume the bound.
  bool safe_gate = false;
  std::optional<double> lower_bound;
  // fla's `attn`: softmax attention layers (empty = None: Gated DeltaNet in every layer).
  // attn_is_list: config.json writes a list (else the single entry as a dict, as it was read).
  std::vector<AttentionConfig> attn;
  bool attn_is_list = false;
  // gdn: which gated-delta-rule implementation and how.
  gdr::Impl kernel = gdr::Impl::chunked;  // recurrent | chunked | fused (kModelKernels)
  int64_t chunk_size = 0;                 // 16 | 32 | 64; 0: the device's (kernel_chunk)
  gdr::Residual residual = gdr::Residual::minimal;
  // gdn: the backends on CUDA, resolved once (backend_overrides below may replace each): the
  // attention kernel (auto: cuDNN's fused attention where it supports the problem, else our flash
  // kernel), the short conv's path, the fused kernels' V tile and chunk (0: the plan's choice).
  attn::Impl attention_impl = attn::Impl::automatic;    // auto | cudnn | flash
  cuda::Conv1dImpl conv1d_impl = cuda::kConv1dDefault;  // direct | cudnn
  int64_t fused_vt = 0, fused_sub = 0;                  // 0 | 16 | 32 | 64

  // KDAConfig's defaults (num_heads 16, head_dim 128, expand_v 1, 24 layers), model_type kda.
  static ModelConfig kda_defaults();
  bool is_kda() const { return model_type == ModelType::kda; }

  // The chunk the layers' kernels run on `device`: chunk_size, or when 0 the device's choice
  // (gdr::auto_chunk; kda::kAutoChunk).
  int64_t kernel_chunk(Device device) const;
  int64_t v_heads() const { return num_v_heads > 0 ? num_v_heads : num_heads; }
  int64_t key_dim() const { return num_heads * head_dim; }
  int64_t head_v_dim() const;
  int64_t value_dim() const { return v_heads() * head_v_dim(); }
  int64_t mlp_intermediate_size() const;
  // The attention entry that layer `layer` belongs to, or null (a Gated DeltaNet layer).
  const AttentionConfig* attention_of(int64_t layer) const {
    for (const AttentionConfig& a : attn)
      for (int64_t l : a.layers)
        if (l == layer) return &a;
    return nullptr;
  }
  // Throws gdn::Error naming the inconsistent fields.
  void validate() const;
  // Parameter count by formula (equals the built model's count; tests check it).
  int64_t num_parameters() const;

  // config.json (Hugging Face): fla's names, model_type gated_deltanet or kda. from_hf_json
  // refuses, naming the field, every fla field whose value gdn would not compute as fla does.
  nlohmann::json to_hf_json() const;
  static ModelConfig from_hf_json(const nlohmann::json& j);
};

// ---- fla's `attn`, read and checked once for every reader (YAML, config.json, validate)

// A place in `attn`, for errors: the entry (-1: attn as a whole; the dict form is entry 0), the
// key in it ("": the entry itself) and the element of that key's list (-1: the whole value).
struct AttentionSpot {
  int64_t entry = -1;
  std::string key;
  int64_t element = -1;
};
// How a reader names a spot in errors: given the spot's key path ("model.attn[1].layers") and the
// spot, the start of the message ("hybrid.yaml:12: model.attn[1].layers", "config.json: field
// 'attn[1].layers'").
using AttentionSpotName =
    std::function<std::string(const std::string& path, const AttentionSpot& spot)>;
// The key path of a spot: `root` ("model.attn", "attn"), "[i]" in the list form, ".key".
std::string attention_path(const std::string& root, bool is_list, const AttentionSpot& spot);

// Sets c.attn and c.attn_is_list from fla's JSON form of `attn` (null, an object or a list of
// objects) as fla's parse_attention_config reads it: `layers` and `num_heads` required, the types
// fla accepts, defaults filled; a key fla does not know is refused (fla keeps it, gdn would not
// compute it). Then check_attention. c's num_hidden_layers and hidden_size must be set.
void read_attention(const nlohmann::json& attn, ModelConfig& c, const std::string& root,
                    const AttentionSpotName& name);
// fla's rules on the values of c.attn (layers in [0, num_hidden_layers), none twice in an entry
// or in two entries; positive heads; window_size null or positive; rope_theta positive and
// finite) and fla's Attention's shapes (hidden_size divisible by num_heads, num_heads by
// num_kv_heads). Throws gdn::Error starting with name(path, spot).
void check_attention(const ModelConfig& c, const std::string& root, const AttentionSpotName& name);
// c.attn as fla's GatedDeltaNetConfig holds it after parsing: null, the single entry as a dict
// (as it was given) or a list, every default filled (num_kv_heads, qkv_bias, window_size null,
// rope_theta a float).
nlohmann::json attention_json(const ModelConfig& c);

// The fields of `a` and `b` that give different models (shapes or math), each as
// "name (value in a vs value in b)"; empty when they describe the same model. Fields without
// effect on the math (initializer_range, bos/eos ids, fuse_* flags, the kernel choice) are not
// compared; derived sizes are compared resolved (num_v_heads null = num_heads); `attn` is
// compared as which layer gets which attention settings (defaults resolved, entry order and
// grouping aside).
std::vector<std::string> model_differences(const ModelConfig& a, const ModelConfig& b);

// ---- the backends' environment overrides, read once per process -----------------------------

// GDN_ATTENTION (auto|cudnn|flash), GDN_CONV1D (direct|cudnn), GDN_FUSED_VT and GDN_FUSED_SUB
// (0|16|32|64): each set one replaces the model key of the same role in every model built
// (with_backend_overrides). Read on the first call, once per process, and said once on stderr; a
// bad value is an error naming the variable and its values.
struct BackendOverrides {
  std::optional<attn::Impl> attention;
  std::optional<cuda::Conv1dImpl> conv1d;
  std::optional<int64_t> fused_vt, fused_sub;
};
const BackendOverrides& backend_overrides();
// c with the environment's overrides applied (CausalLM builds its layers from this).
ModelConfig with_backend_overrides(ModelConfig c);

}  // namespace gdn::nn
