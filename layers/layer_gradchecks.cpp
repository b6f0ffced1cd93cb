// Layer and kernel gradient checks. Each check builds its module in fp64 from a seeded
// generator, and checks d loss / d (inputs and every parameter).
#include "layers/layer_gradchecks.h"

#include <functional>
#include <map>

#include "layers/attention.h"
#include "layers/gated_deltanet.h"
#include "layers/kimi_delta_attention.h"
#include "layers/model.h"
#include "layers/short_conv.h"
#include "src/ops/gated_delta_rule.h"
#include "src/ops/ops.h"

namespace gdn::nn {

InitContext fp64_ctx(Generator* gen, double std) {
  InitContext ctx;
  ctx.dtype = DType::float64;
  ctx.gen = gen;
  ctx.std = std;  // larger than 0.02 so every path carries signal
  return ctx;
}

AttentionConfig gradcheck_attention_config(int64_t heads, int64_t kv_heads, int64_t window,
                                           bool bias) {
  AttentionConfig a;
  a.num_heads = heads;
  a.num_kv_heads = kv_heads;
  a.window_size = window;
  a.qkv_bias = bias;
  a.rope_theta = 100.0;  // a small base turns every pair by a visible angle over 11 positions
  return a;
}

namespace {

using autograd::GradcheckReport;

thread_local int64_t t_max_elements = 24;  // set by run_layer_gradcheck for its checks

ModelConfig tiny_config() {
  ModelConfig c;
  c.hidden_size = 8;
  c.num_hidden_layers = 1;
  c.num_heads = 2;
  c.head_dim = 4;
  c.expand_v = 1.5;
  c.conv_size = 3;
  c.vocab_size = 11;
  c.intermediate_size = 12;
  c.chunk_size = 16;
  c.initializer_range = 0.3;
  return c;
}

// Checks a module: f(inputs) with the module's parameters as extra checked inputs.
GradcheckReport check_module(const std::string& what, const Module& m, std::vector<Tensor> inputs,
                             std::vector<std::string> names,
                             const std::function<Tensor(const std::vector<Tensor>&)>& f,
                             uint64_t seed) {
  for (auto& [n, p] : m.named_parameters()) {
    inputs.push_back(p);
    names.push_back(n);
  }
  autograd::GradcheckOptions opt;
  opt.seed = seed;
  opt.max_elements = t_max_elements;
  return autograd::gradcheck(what, f, inputs, names, opt);
}

Tensor input(const Shape& s, Generator& g) {
  return ops::randn(s, DType::float64, Device::cpu(), &g).set_requires_grad(true);
}

using LayerCheck = std::function<GradcheckReport(uint64_t)>;

// cu_seqlens empty: one sequence; else packed sequences over the 19 positions.
GradcheckReport check_gdn_layer(const std::string& what, ModelConfig c, uint64_t seed,
                                const CuSeqlens& cu = {}) {
  Generator g(seed);
  GatedDeltaNet layer(c, fp64_ctx(&g, c.initializer_range));
  Tensor x = input({1, 19, c.hidden_size}, g);  // T = 19: a full and a partial chunk
  return check_module(
      what, layer, {x}, {"x"},
      [&](const std::vector<Tensor>& in) { return layer.forward(in[0], cu); }, seed);
}

// The Kimi Delta Attention mixer of a tiny kda config (kernel and options from `edit`) on
// x [1, 19, 8]; cu_seqlens empty: one sequence, else packed sequences over the 19 positions.
GradcheckReport check_kda_layer(const std::string& what, uint64_t seed,
                                const std::function<void(ModelConfig&)>& edit,
                                const CuSeqlens& cu = {}) {
  ModelConfig c = tiny_config();
  c.model_type = ModelType::kda;
  c.expand_v = 1.0;
  edit(c);
  Generator g(seed);
  KimiDeltaAttention layer(c, fp64_ctx(&g, c.initializer_range));
  ops::normal_(layer.g_proj->up->bias, 0.0, 0.3, &g);  // away from its init of 0
  Tensor x = input({1, 19, c.hidden_size}, g);
  return check_module(
      what, layer, {x}, {"x"},
      [&](const std::vector<Tensor>& in) { return layer.forward(in[0], cu); }, seed);
}

// The softmax attention mixer of `a` (its layers set here) on x [1, 11, 8]; cu_seqlens empty: one
// sequence, else packed sequences over the 11 positions.
GradcheckReport check_attention_layer(const std::string& what, AttentionConfig a, uint64_t seed,
                                      const CuSeqlens& cu = {}) {
  Generator g(seed);
  ModelConfig c = tiny_config();
  a.layers = {0};
  c.attn = {a};
  Attention layer(c, a, fp64_ctx(&g, c.initializer_range));
  for (auto& [n, p] : layer.named_parameters())  // biases away from their init of 0
    if (n.find("bias") != std::string::npos) ops::normal_(p, 0.0, 0.3, &g);
  Tensor x = input({1, 11, c.hidden_size}, g);
  return check_module(
      what, layer, {x}, {"x"},
      [&](const std::vector<Tensor>& in) { return layer.forward(in[0], cu); }, seed);
}

// d loss / d every parameter of a small CausalLM on random tokens [B, seq]; `attn`: softmax
// attention layers (a hybrid model).
GradcheckReport check_causal_lm(const std::string& what, int64_t layers, bool tied,
                                Checkpointing checkpointing, int64_t seq, uint64_t seed,
                                const std::vector<AttentionConfig>& attn = {},
                                ModelType type = ModelType::gated_deltanet) {
  Generator g(seed);
  ModelConfig c = tiny_config();
  c.model_type = type;
  c.num_hidden_layers = layers;
  c.tie_word_embeddings = tied;
  c.attn = attn;
  CausalLM m(c, fp64_ctx(&g));
  m.compute_dtype = DType::float64;
  m.checkpointing = checkpointing;
  const int64_t batch = layers > 1 && checkpointing == Checkpointing::none ? 2 : 1;
  Tensor ids = ops::randint({batch, seq}, 0, c.vocab_size, DType::int64, Device::cpu(), &g);
  Tensor tgt = ops::randint({batch, seq}, 0, c.vocab_size, DType::int64, Device::cpu(), &g);
  return check_module(
      what, m, {}, {}, [&](const std::vector<Tensor>&) { return m.loss(ids, tgt); }, seed);
}

const std::map<std::string, LayerCheck>& registry() {
  static const std::map<std::string, LayerCheck> checks = {
      {"linear",
       [](uint64_t s) {
         Generator g(s);
         Linear m(5, 4, true, fp64_ctx(&g));
         Tensor x = input({2, 3, 5}, g);
         return check_module(
             "layer linear", m, {x}, {"x"}, [&](auto& in) { return m.forward(in[0]); }, s);
       }},
      {"embedding",
       [](uint64_t s) {
         Generator g(s);
         Embedding m(7, 3, fp64_ctx(&g));
         Tensor ids = ops::from_vector({1, 6, 6, 0, 3}, {1, 5}, DType::int64);
         return check_module(
             "layer embedding", m, {}, {}, [&](auto&) { return m.forward(ids, DType::float64); },
             s);
       }},
      {"rms_norm",
       [](uint64_t s) {
         Generator g(s);
         RMSNorm m(6, 1e-6, fp64_ctx(&g));
         ops::normal_(m.weight, 1.0, 0.3, &g);
         Tensor x = input({3, 6}, g);
         return check_module(
             "layer rms_norm", m, {x}, {"x"}, [&](auto& in) { return m.forward(in[0]); }, s);
       }},
      {"gated_rms_norm",
       [](uint64_t s) {
         Generator g(s);
         GatedRMSNorm m(4, 1e-6, fp64_ctx(&g));
         ops::normal_(m.weight, 1.0, 0.3, &g);
         Tensor x = input({2, 3, 4}, g), gate = input({2, 3, 4}, g);
         return check_module(
             "layer gated_rms_norm", m, {x, gate}, {"x", "gate"},
             [&](auto& in) { return m.forward(in[0], in[1]); }, s);
       }},
      {"gated_rms_norm_sigmoid",
       [](uint64_t s) {
         Generator g(s);
         GatedRMSNorm m(4, 1e-6, fp64_ctx(&g), GateActivation::sigmoid);
         ops::normal_(m.weight, 1.0, 0.3, &g);
         Tensor x = input({2, 3, 4}, g), gate = input({2, 3, 4}, g);
         return check_module(
             "layer gated_rms_norm (sigmoid gate)", m, {x, gate}, {"x", "gate"},
             [&](auto& in) { return m.forward(in[0], in[1]); }, s);
       }},
      {"short_conv",
       [](uint64_t s) {
         Generator g(s);
         ShortConv m(3, 4, fp64_ctx(&g));
         Tensor x = input({2, 6, 3}, g);
         return check_module(
             "layer short_conv", m, {x}, {"x"}, [&](auto& in) { return m.forward(in[0]); }, s);
       }},
      {"gated_mlp",
       [](uint64_t s) {
         Generator g(s);
         GatedMLP m(5, 7, fp64_ctx(&g));
         Tensor x = input({2, 2, 5}, g);
         return check_module(
             "layer gated_mlp", m, {x}, {"x"}, [&](auto& in) { return m.forward(in[0]); }, s);
       }},
      {"gated_deltanet_recurrent",
       [](uint64_t s) {
         ModelConfig c = tiny_config();
         c.kernel = gdr::Impl::recurrent;
         return check_gdn_layer("layer gated_deltanet (recurrent)", c, s);
       }},
      {"gated_deltanet_chunked",
       [](uint64_t s) {
         return check_gdn_layer("layer gated_deltanet (chunked)", tiny_config(), s);
       }},
      {"gated_deltanet_fused",
       [](uint64_t s) {
         ModelConfig c = tiny_config();
         c.kernel = gdr::Impl::fused;
         return check_gdn_layer("layer gated_deltanet (fused)", c, s);
       }},
      {"gated_deltanet_packed",
       [](uint64_t s) {
         // Sequences of 2, 1, 8 and 8 tokens: shorter than the conv, inside one chunk.
         return check_gdn_layer("layer gated_deltanet (packed cu_seqlens)", tiny_config(), s,
                                {0, 2, 3, 11, 19});
       }},
      {"gated_deltanet_gva",
       [](uint64_t s) {
         ModelConfig c = tiny_config();
         c.num_v_heads = 4;
         return check_gdn_layer("layer gated_deltanet (GVA)", c, s);
       }},
      {"gated_deltanet_plain",
       [](uint64_t s) {
         ModelConfig c = tiny_config();
         c.use_gate = false;
         c.use_short_conv = false;
         c.allow_neg_eigval = true;
         return check_gdn_layer("layer gated_deltanet (no gate/conv)", c, s);
       }},
      {"gated_deltanet_sigmoid_gate",
       [](uint64_t s) {
         ModelConfig c = tiny_config();
         c.output_gate_activation = GateActivation::sigmoid;
         return check_gdn_layer("layer gated_deltanet (sigmoid output gate)", c, s);
       }},
      {"kimi_delta_attention_recurrent",
       [](uint64_t s) {
         return check_kda_layer("layer kimi_delta_attention (recurrent)", s,
                                [](ModelConfig& c) { c.kernel = gdr::Impl::recurrent; });
       }},
      {"kimi_delta_attention_chunked",
       [](uint64_t s) {
         return check_kda_layer("layer kimi_delta_attention (chunked)", s, [](ModelConfig&) {});
       }},
      {"kimi_delta_attention_packed",
       [](uint64_t s) {
         return check_kda_layer("layer kimi_delta_attention (packed cu_seqlens)", s,
                                [](ModelConfig&) {}, {0, 2, 3, 11, 19});
       }},
      {"kimi_delta_attention_gva_bound",
       [](uint64_t s) {
         return check_kda_layer("layer kimi_delta_attention (GVA, lower_bound, neg. eigval)", s,
                                [](ModelConfig& c) {
                                  c.num_v_heads = 4;
                                  c.lower_bound = -5.0;
                                  c.allow_neg_eigval = true;
                                  c.use_short_conv = false;
                                });
       }},
      {"attention",
       [](uint64_t s) {
         return check_attention_layer("layer attention", gradcheck_attention_config(2, 0, 0, false),
                                      s);
       }},
      {"attention_window_gqa_bias",
       [](uint64_t s) {
         return check_attention_layer("layer attention (window 3, GQA 4/2, qkv_bias)",
                                      gradcheck_attention_config(4, 2, 3, true), s);
       }},
      {"attention_packed",
       [](uint64_t s) {
         // Sequences of 3, 1 and 7 tokens; the window of 4 cuts only the last.
         return check_attention_layer("layer attention (packed cu_seqlens, window 4, MQA)",
                                      gradcheck_attention_config(2, 1, 4, false), s, {0, 3, 4, 11});
       }},
      {"block",
       [](uint64_t s) {
         Generator g(s);
         ModelConfig c = tiny_config();
         Block m(c, 0, fp64_ctx(&g));
         Tensor x = input({1, 7, c.hidden_size}, g);
         return check_module(
             "layer block", m, {x}, {"x"}, [&](auto& in) { return m.forward(in[0]); }, s);
       }},
      {"causal_lm",
       [](uint64_t s) {
         return check_causal_lm("layer causal_lm (2 layers, loss)", 2, false, Checkpointing::none,
                                9, s);
       }},
      {"causal_lm_checkpoint_block",
       [](uint64_t s) {
         return check_causal_lm("layer causal_lm (checkpoint block)", 2, false,
                                Checkpointing::block, 9, s);
       }},
      {"causal_lm_checkpoint_kernel",
       [](uint64_t s) {
         return check_causal_lm("layer causal_lm (checkpoint kernel)", 1, false,
                                Checkpointing::kernel, 9, s);
       }},
      {"causal_lm_hybrid",
       [](uint64_t s) {
         AttentionConfig a = gradcheck_attention_config(2, 1, 0, true);
         a.layers = {1};
         return check_causal_lm("layer causal_lm (hybrid: layer 1 attention)", 3, false,
                                Checkpointing::none, 7, s, {a});
       }},
      {"causal_lm_hybrid_checkpoint_kernel",
       [](uint64_t s) {
         AttentionConfig a = gradcheck_attention_config(2, 0, 3, false);
         a.layers = {0};
         return check_causal_lm("layer causal_lm (hybrid, checkpoint kernel)", 2, false,
                                Checkpointing::kernel, 7, s, {a});
       }},
      {"causal_lm_kda_hybrid",
       [](uint64_t s) {
         AttentionConfig a = gradcheck_attention_config(2, 1, 0, false);
         a.layers = {1};
         return check_causal_lm("layer causal_lm (kda hybrid: layer 1 attention)", 2, false,
                                Checkpointing::none, 7, s, {a}, ModelType::kda);
       }},
      {"causal_lm_tied",
       [](uint64_t s) {
         return check_causal_lm("layer causal_lm (tied)", 1, true, Checkpointing::none, 8, s);
       }},
  };
  return checks;
}

}  // namespace

std::vector<std::string> layer_gradcheck_names() {
  std::vector<std::string> n;
  for (const auto& kv : registry()) n.push_back(kv.first);
  return n;
}

GradcheckReport run_layer_gradcheck(const std::string& name, uint64_t seed, int64_t max_elements) {
  auto it = registry().find(name);
  if (it == registry().end()) {
    std::string known;
    for (const auto& n : layer_gradcheck_names()) known += " " + n;
    GDN_FAIL("unknown layer gradcheck '", name, "'; known:", known);
  }
  t_max_elements = max_elements;
  return it->second(seed + 5);
}

// Every implementation, alone and with packed sequences ("NAME_packed": cu_seqlens).
std::vector<std::string> kernel_gradcheck_names() {
  std::vector<std::string> names;
  for (const gdr::Implementation& i : gdr::implementations()) {
    names.push_back(i.name);
    names.push_back(std::string(i.name) + "_packed");
  }
  return names;
}

GradcheckReport run_kernel_gradcheck(const std::string& name, uint64_t seed) {
  const std::string suffix = "_packed";
  const bool packed = name.size() > suffix.size() &&
                      name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
  const std::string impl = packed ? name.substr(0, name.size() - suffix.size()) : name;
  const gdr::Implementation* entry = nullptr;
  try {
    entry = &gdr::find_implementation(impl);
  } catch (const std::invalid_argument&) {
    GDN_FAIL("unknown kernel '", name, "' (known: ", gdr::implementation_names(),
             ", each also as NAME_packed)");
  }
  ops::GdrOptions opt;
  opt.use(*entry);
  opt.chunk_size = 16;
  opt.output_final_state = true;
  // Packed: sequences of 3, 17 (across a chunk boundary) and 4 tokens, each from its own h0 row.
  if (packed) opt.cu_seqlens = {0, 3, 20, 24};
  const int64_t T = packed ? 24 : 21, N = packed ? 3 : 1;
  const bool ssd = !entry->delta_rule;
  Generator g(seed + 77);
  // B=1, T=21 (a partial second chunk) or the packed 24, H=1, HV=2 (GVA), K=4, V=3, with h0.
  std::vector<Tensor> in = {input({1, T, 1, 4}, g), input({1, T, 1, 4}, g), input({1, T, 2, 3}, g),
                            input({1, T, 2}, g),    input({1, T, 2}, g),    input({N, 2, 4, 3}, g)};
  std::vector<std::string> names = {"q", "k", "v", "g", "beta", "h0"};
  if (ssd) in[4] = in[4].detach();  // unused by ssd
  autograd::MultiFn f = [opt, ssd](const std::vector<Tensor>& x) {
    // Inputs in the kernel's domain: unit keys, log decay <= 0, beta in (0, 1).
    Tensor k = ops::l2_norm(x[1], 1e-6);
    Tensor gl = ops::neg(ops::softplus(x[3]));
    Tensor beta = ssd ? Tensor() : ops::sigmoid(x[4]);
    auto r = ops::gated_delta_rule(x[0], k, x[2], gl, beta, opt, x[5]);
    return std::vector<Tensor>{r.o, r.ht};
  };
  autograd::GradcheckOptions o;
  o.seed = seed;
  return autograd::gradcheck("kernel " + name, f, in, names, o);
}

}  // namespace gdn::nn
