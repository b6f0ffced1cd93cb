// The Kimi Delta Attention model (fla's `kda`): its config (YAML from KDAConfig's defaults,
// config.json both ways as fla writes it, every refusal), fla's parameter names and count, the
// mixer each layer gets (hybrids through `attn`), and in fp64: the two kernels agree through the
// model, packed documents equal each document alone, generation through the recurrent state
// equals the full forward, and the lower_bound gate computes what it says.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "layers/config.h"
#include "layers/kimi_delta_attention.h"
#include "layers/model.h"
#include "layers/token_mixer.h"
#include "src/ops/ops.h"
#include "src/train/memory_profile.h"
#include "src/train/run_config.h"
#include "tests/test_helpers.h"
#include "tests/test_util.h"

namespace gdn {
namespace {

using nlohmann::json;
using test::error_of;

bool has(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// What fla 0.6.0's KDAForCausalLM(KDAConfig(hidden_size=64, num_hidden_layers=1, num_heads=2,
// head_dim=32, vocab_size=100)).save_pretrained writes as config.json.
const char* kFlaKdaConfig = R"({
  "allow_neg_eigval": false, "architectures": ["KDAForCausalLM"], "attn": null,
  "attn_mode": "chunk", "attnres_block_size": null, "bos_token_id": 1, "conv_size": 4,
  "dtype": "float32", "eos_token_id": 2, "expand_v": 1.0, "fuse_cross_entropy": true,
  "fuse_norm": true, "fuse_swiglu": true, "head_dim": 32, "hidden_act": "swish",
  "hidden_ratio": 4, "hidden_size": 64, "initializer_range": 0.02, "intermediate_size": null,
  "lower_bound": null, "max_position_embeddings": 2048, "model_type": "kda", "norm_eps": 1e-06,
  "num_heads": 2, "num_hidden_layers": 1, "num_v_heads": null, "pad_token_id": null,
  "safe_gate": false, "tie_word_embeddings": false, "transformers_version": "5.25.0",
  "use_cache": true, "use_l2warp": false, "use_short_conv": true, "vocab_size": 100})";

train::RunConfig parse(const std::string& model_lines, const std::vector<std::string>& sets = {}) {
  return train::parse_run_config("model:\n  model_type: kda\n" + model_lines, "kda.yaml", sets);
}

// ---- config ------------------------------------------------------------------------------------

TEST(KdaConfig, YamlStartsFromKdaConfigsDefaults) {
  const nn::ModelConfig m = parse("  hidden_size: 64\n").model;
  EXPECT_EQ(m.model_type, nn::ModelType::kda);
  EXPECT_EQ(m.num_heads, 16);
  EXPECT_EQ(m.head_dim, 128);
  EXPECT_EQ(m.expand_v, 1.0);
  EXPECT_EQ(m.num_hidden_layers, 24);
  EXPECT_FALSE(m.lower_bound);
  // And through --set, with the lower-bound gate.
  const nn::ModelConfig s = train::parse_run_config("model:\n  hidden_size: 64\n", "x.yaml",
                                                    {"model.model_type=kda", "model.lower_bound=-5",
                                                     "model.safe_gate=true"})
                                .model;
  EXPECT_TRUE(s.is_kda());
  EXPECT_EQ(s.head_dim, 128);
  ASSERT_TRUE(s.lower_bound);
  EXPECT_EQ(*s.lower_bound, -5.0);
  // The resolved config (a run's config.yaml) reads back the same.
  const train::RunConfig r = parse("  hidden_size: 64\n  lower_bound: -3.5\n");
  const train::RunConfig back = train::parse_run_config(r.to_yaml(), "config.yaml");
  EXPECT_TRUE(nn::model_differences(r.model, back.model).empty());
  EXPECT_EQ(*back.model.lower_bound, -3.5);
}

TEST(KdaConfig, EveryRefusalNamesItsKey) {
  EXPECT_TRUE(has(error_of([] { parse("  kernel: fused\n"); }),
                  "model.kernel: 'fused' has no Kimi Delta Attention kernel"));
  EXPECT_TRUE(has(error_of([] { parse("  safe_gate: true\n"); }),
                  "model.safe_gate: true needs model.lower_bound"));
  EXPECT_TRUE(has(error_of([] { parse("  lower_bound: 0.5\n"); }),
                  "model.lower_bound must be a negative number"));
  EXPECT_TRUE(
      has(error_of([] { parse("  use_gate: false\n"); }), "a KDA layer always gates its output"));
  EXPECT_TRUE(has(error_of([] {
                    train::parse_run_config("model:\n  hidden_size: 64\n  lower_bound: -5\n",
                                            "g.yaml");
                  }),
                  "model.safe_gate and model.lower_bound are KDAConfig's"));
  const std::string e = error_of([] {
    train::parse_run_config("model:\n  hidden_size: 64\n  model_type: mamba\n", "m.yaml");
  });
  EXPECT_TRUE(has(e,
                  "m.yaml:3: model.model_type: unknown model_type 'mamba' (expected "
                  "gated_deltanet or kda)"))
      << e;
}

TEST(KdaConfig, ConfigJsonBothWaysAsFlaWritesIt) {
  const nn::ModelConfig c = nn::ModelConfig::from_hf_json(json::parse(kFlaKdaConfig));
  EXPECT_TRUE(c.is_kda());
  EXPECT_EQ(c.hidden_size, 64);
  EXPECT_EQ(c.head_dim, 32);
  EXPECT_EQ(c.expand_v, 1.0);
  EXPECT_FALSE(c.lower_bound);
  const json j = c.to_hf_json();
  EXPECT_EQ(j["model_type"], "kda");
  EXPECT_EQ(j["architectures"], json::array({"KDAForCausalLM"}));
  EXPECT_EQ(j["safe_gate"], false);
  EXPECT_TRUE(j["lower_bound"].is_null());
  // KDAConfig has neither: fla would keep them as unknown attributes.
  EXPECT_FALSE(j.contains("use_gate"));
  EXPECT_FALSE(j.contains("output_gate_activation"));
  // Every field fla wrote reads back as written.
  const json fla = json::parse(kFlaKdaConfig);
  for (const auto& [key, value] : fla.items()) {
    if (key == "dtype" || key == "transformers_version") continue;
    ASSERT_TRUE(j.contains(key)) << key;
    EXPECT_EQ(j[key], value) << key;
  }
  json lb = fla;
  lb["lower_bound"] = -5.0;
  lb["safe_gate"] = true;
  const nn::ModelConfig b = nn::ModelConfig::from_hf_json(lb);
  EXPECT_EQ(*b.lower_bound, -5.0);
  EXPECT_TRUE(b.safe_gate);
  EXPECT_EQ(nn::ModelConfig::from_hf_json(b.to_hf_json()).to_hf_json(), b.to_hf_json());
  // The family and the gate's form are part of what a model is.
  const std::vector<std::string> d = nn::model_differences(c, b);
  EXPECT_EQ(d, std::vector<std::string>{"lower_bound (null vs -5)"});
  nn::ModelConfig gdn = c;
  gdn.model_type = nn::ModelType::gated_deltanet;
  EXPECT_TRUE(has(nn::model_differences(c, gdn)[0], "model_type (kda vs gated_deltanet)"));
  json bad = fla;
  bad["model_type"] = "mamba2";
  EXPECT_TRUE(has(error_of([&] { nn::ModelConfig::from_hf_json(bad); }),
                  "model_type is 'mamba2', expected gated_deltanet or kda"));
  bad = fla;
  bad["safe_gate"] = true;
  EXPECT_TRUE(has(error_of([&] { nn::ModelConfig::from_hf_json(bad); }),
                  "model.safe_gate: true needs model.lower_bound"));
}

// ---- the model ---------------------------------------------------------------------------------

nn::ModelConfig small_kda() {
  nn::ModelConfig c = nn::ModelConfig::from_hf_json(json::parse(kFlaKdaConfig));
  c.chunk_size = 16;
  return c;
}

TEST(KdaModel, ParameterNamesAndCountAreFlas) {
  Generator g(0);
  nn::InitContext ctx;
  ctx.gen = &g;
  nn::CausalLM m(small_kda(), ctx);
  std::vector<std::string> attn;
  for (auto& [n, p] : m.named_parameters())
    if (n.rfind("model.layers.0.attn.", 0) == 0)
      attn.push_back(n.substr(20) + " " + shape_str(p.shape()));
  std::sort(attn.begin(), attn.end());
  // fla's state_dict of the layer (KDAForCausalLM of kFlaKdaConfig), sorted.
  const std::vector<std::string> fla = {"A_log [2]",
                                        "b_proj.weight [2, 64]",
                                        "dt_bias [64]",
                                        "f_proj.0.weight [32, 64]",
                                        "f_proj.1.weight [64, 32]",
                                        "g_proj.0.weight [32, 64]",
                                        "g_proj.1.bias [64]",
                                        "g_proj.1.weight [64, 32]",
                                        "k_conv1d.weight [64, 1, 4]",
                                        "k_proj.weight [64, 64]",
                                        "o_norm.weight [32]",
                                        "o_proj.weight [64, 64]",
                                        "q_conv1d.weight [64, 1, 4]",
                                        "q_proj.weight [64, 64]",
                                        "v_conv1d.weight [64, 1, 4]",
                                        "v_proj.weight [64, 64]"};
  std::vector<std::string> want = fla;
  std::sort(want.begin(), want.end());
  EXPECT_EQ(attn, want);
  EXPECT_EQ(m.num_parameters(), 87778);  // fla's count
  EXPECT_EQ(m.cfg.num_parameters(), 87778);
  ASSERT_NE(dynamic_cast<nn::KimiDeltaAttention*>(m.model->layers[0]->attn.get()), nullptr);
}

TEST(KdaModel, HybridLayersAreKdaAndAttention) {
  nn::ModelConfig c = small_kda();
  c.num_hidden_layers = 3;
  nn::AttentionConfig a;
  a.layers = {1};
  a.num_heads = 4;
  c.attn = {a};
  Generator g(1);
  nn::InitContext ctx;
  ctx.gen = &g;
  nn::CausalLM m(c, ctx);
  for (int64_t l = 0; l < 3; ++l)
    EXPECT_EQ(
        dynamic_cast<nn::KimiDeltaAttention*>(m.model->layers[size_t(l)]->attn.get()) == nullptr,
        l == 1)
        << l;
  EXPECT_EQ(m.num_parameters(), c.num_parameters());
  EXPECT_STREQ(nn::token_mixer_of(c, 0).name, "kimi_delta_attention");
  EXPECT_STREQ(nn::token_mixer_of(c, 1).name, "attention");
}

// A 2-layer fp64 KDA model with GVA and strong decays, its parameters moved off their init.
std::unique_ptr<nn::CausalLM> fp64_model(nn::ModelConfig c, uint64_t seed = 3) {
  c.num_hidden_layers = 2;
  c.num_v_heads = 4;
  c.vocab_size = 50;
  Generator g(seed);
  nn::InitContext ctx;
  ctx.dtype = DType::float64;
  ctx.gen = &g;
  ctx.std = 0.2;
  auto m = std::make_unique<nn::CausalLM>(c, ctx);
  m->compute_dtype = DType::float64;
  return m;
}

TEST(KdaModel, KernelsAgreeThroughTheModel) {
  std::vector<double> losses;
  std::vector<std::vector<double>> grads;
  for (gdr::Impl kernel : {gdr::Impl::recurrent, gdr::Impl::chunked}) {
    nn::ModelConfig c = small_kda();
    c.kernel = kernel;
    auto m = fp64_model(c);
    Generator d(9);
    Tensor ids = ops::randint({2, 37}, 0, 50, DType::int64, Device::cpu(), &d);
    Tensor tgt = ops::randint({2, 37}, 0, 50, DType::int64, Device::cpu(), &d);
    Tensor loss = m->loss(ids, tgt);
    loss.backward();
    losses.push_back(loss.item());
    std::vector<double> all;
    for (auto& [n, p] : m->named_parameters()) {
      auto v = p.grad().to_vector();
      all.insert(all.end(), v.begin(), v.end());
    }
    grads.push_back(all);
  }
  EXPECT_NEAR(losses[1], losses[0], 1e-12 * std::abs(losses[0]));
  EXPECT_LT(test::rel_err(grads[1], grads[0]), 1e-10);
}

TEST(KdaModel, PackedDocumentsEqualEachDocumentAlone) {
  auto m = fp64_model(small_kda());
  Generator d(4);
  Tensor ids = ops::randint({1, 30}, 0, 50, DType::int64, Device::cpu(), &d);
  const std::vector<int64_t> cu = {0, 3, 20, 30};
  Tensor packed = m->logits(ids, cu);
  for (size_t s = 0; s + 1 < cu.size(); ++s) {
    Tensor alone = m->logits(ops::contiguous(ops::slice(ids, 1, cu[s], cu[s + 1])));
    EXPECT_LT(test::rel_err(ops::slice(packed, 1, cu[s], cu[s + 1]), alone), 1e-12) << s;
  }
}

TEST(KdaModel, GenerationStateMatchesFullForward) {
  auto m = fp64_model(small_kda());
  Generator g(5);
  Tensor ids = ops::randint({1, 9}, 0, 50, DType::int64, Device::cpu(), &g);
  Tensor full;
  {
    autograd::NoGradGuard ng;
    full = m->logits(ids);
  }
  std::vector<nn::LayerState> states(2);
  Tensor first = m->step(ops::contiguous(ops::slice(ids, 1, 0, 4)), states);
  EXPECT_LT(test::rel_err(first, ops::slice(full, 1, 3, 4)), 1e-12);
  for (int64_t t = 4; t < 9; ++t) {
    Tensor lg = m->step(ops::contiguous(ops::slice(ids, 1, t, t + 1)), states);
    EXPECT_LT(test::rel_err(lg, ops::slice(full, 1, t, t + 1)), 1e-12) << t;
  }
}

// The decay of each form, written out per element: -exp(A_log) softplus(f + dt_bias), and
// lower_bound sigmoid(exp(A_log) (f + dt_bias)) in [lower_bound, 0).
TEST(KdaModel, GateFormsComputeWhatTheySay) {
  for (const bool bounded : {false, true}) {
    nn::ModelConfig c = small_kda();
    if (bounded) c.lower_bound = -5.0;
    Generator g(6);
    nn::InitContext ctx;
    ctx.dtype = DType::float64;
    ctx.gen = &g;
    nn::KimiDeltaAttention layer(c, ctx);
    ops::normal_(layer.A_log, 0.5, 1.0, &g);
    Tensor f = ops::randn({1, 3, 64}, DType::float64, Device::cpu(), &g);
    const std::vector<double> got = layer.decay(f).to_vector(), fv = f.to_vector();
    const std::vector<double> a = layer.A_log.to_vector(), dt = layer.dt_bias.to_vector();
    ASSERT_EQ(got.size(), 3u * 2 * 32);
    for (size_t t = 0; t < 3; ++t)
      for (size_t h = 0; h < 2; ++h)
        for (size_t k = 0; k < 32; ++k) {
          const size_t i = (t * 2 + h) * 32 + k;
          const double z = fv[i] + dt[h * 32 + k], A = std::exp(a[h]);
          const double want =
              bounded ? -5.0 / (1.0 + std::exp(-A * z)) : -A * std::log1p(std::exp(z));
          EXPECT_NEAR(got[i], want, 1e-13 * std::abs(want) + 1e-300) << bounded << " " << i;
          if (bounded) {
            EXPECT_GT(got[i], -5.0);
          }
        }
  }
}

// configs/kda-340m-8k.yaml: a ~350M KDA model whose training step at T = 8192 fits a 24 GiB card
// with the 1 GiB allowance (one step on the meta device, the trainer's own code).
TEST(KdaConfigs, Kda340mAt8kFits24GiB) {
  const std::string path =
      (std::filesystem::path(__FILE__).parent_path().parent_path() / "configs" / "kda-340m-8k.yaml")
          .string();
  const train::RunConfig c = train::load_run_config(path);
  EXPECT_TRUE(c.model.is_kda());
  EXPECT_GT(c.model.num_parameters(), 340'000'000);
  EXPECT_LT(c.model.num_parameters(), 360'000'000);
  const train::MemoryProfile p = train::profile_training_step(c, "meta", 1, 8192);
  const int64_t gib = int64_t(1) << 30;
  EXPECT_LE(p.peak_bytes + gib, 24 * gib) << p.peak_bytes;
}

}  // namespace
}  // namespace gdn
