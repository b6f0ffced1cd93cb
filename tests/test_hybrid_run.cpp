// A hybrid model end to end: fla's `attn` in a run config's YAML gives softmax attention in its
// layers; the run trains and resumes bit for bit; its checkpoint is a model directory whose
// config.json carries fla's attn entry and whose weights sit under fla's names; the directory
// loads back to the same logits, and generation with the KV cache equals the full forward.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "layers/attention.h"
#include "layers/model.h"
#include "layers/token_mixer.h"
#include "src/io/safetensors.h"
#include "src/ops/ops.h"
#include "src/train/model_dir.h"
#include "src/train/model_io.h"
#include "src/train/trainer.h"
#include "tests/test_helpers.h"
#include "tests/tiny_runs.h"

namespace gdn {
namespace {

namespace fs = std::filesystem;

// The tiny text run with 3 layers of hidden 32 (2 heads of 16), layer 1 softmax attention (2
// query heads sharing one kv head, a window of 8), set in the run's YAML.
train::RunConfig hybrid_run(const std::string& root, const std::string& run) {
  return test::tiny_text_run(root, run, {}, {32, 3, 2, 16, 256, 16}, R"(  attn:
    layers: [1]
    num_heads: 2
    num_kv_heads: 1
    window_size: 8
)");
}

TEST(HybridRun, TrainsAndResumesBitForBit) {
  const std::string root = test::fresh_dir("gdn_test_hybrid_run");
  test::write_tiny_corpus(fs::path(root) / "corpus");
  train::RunConfig a = hybrid_run(root, "a");
  ASSERT_EQ(std::string(nn::token_mixer_of(a.model, 1).name), "attention");
  Generator g(1);
  const nn::CausalLM m(a.model, test::init_context(g));
  EXPECT_NE(dynamic_cast<nn::Attention*>(m.model->layers[1]->attn.get()), nullptr);
  test::train_whole_and_resumed(a, hybrid_run(root, "b"), 3, 8);
  const auto la = test::loss_curve((fs::path(root) / "a").string());
  EXPECT_EQ(la.size(), 8u + 2u);
  EXPECT_EQ(la, test::loss_curve((fs::path(root) / "b").string()));  // bit for bit
}

TEST(HybridRun, CheckpointIsAnFlaModelDirectoryThatLoadsAndGenerates) {
  const std::string root = test::fresh_dir("gdn_test_hybrid_dir");
  test::write_tiny_corpus(fs::path(root) / "corpus");
  train::RunConfig cfg = hybrid_run(root, "run");
  cfg.train.steps = 2;
  train::TrainerOptions quiet;
  quiet.quiet = true;
  {
    train::Trainer t(cfg, quiet);
    t.run();
  }
  // config.json: fla's attn entry as fla's parse_attention_config fills it.
  const train::ForwardModel f = train::resolve_forward_model("", {}, root + "/run");
  std::ifstream cj(fs::path(f.weights_dir) / "config.json");
  const nlohmann::json j = nlohmann::json::parse(cj);
  const nlohmann::json want = {{"layers", {1}},     {"num_heads", 2},   {"num_kv_heads", 1},
                               {"qkv_bias", false}, {"window_size", 8}, {"rope_theta", 10000.0}};
  EXPECT_EQ(j.at("attn"), want) << j.at("attn").dump();
  // Weights under fla's names: layer 1 holds the attention projections and no Gated DeltaNet.
  const io::NamedTensors w =
      io::load_safetensors((fs::path(f.weights_dir) / "model.safetensors").string());
  std::map<std::string, Shape> shapes;
  for (const auto& [name, t] : w) shapes[name] = t.shape();
  EXPECT_EQ(shapes.at("model.layers.1.attn.q_proj.weight"), (Shape{32, 32}));
  EXPECT_EQ(shapes.at("model.layers.1.attn.k_proj.weight"), (Shape{16, 32}));
  EXPECT_EQ(shapes.at("model.layers.1.attn.v_proj.weight"), (Shape{16, 32}));
  EXPECT_EQ(shapes.at("model.layers.1.attn.o_proj.weight"), (Shape{32, 32}));
  EXPECT_EQ(shapes.count("model.layers.1.attn.q_proj.bias"), 0u);
  EXPECT_EQ(shapes.count("model.layers.1.attn.g_proj.weight"), 0u);
  EXPECT_EQ(shapes.count("model.layers.0.attn.g_proj.weight"), 1u);
  // The directory loads back to the trained model, and the KV cache generates its logits.
  EXPECT_TRUE(nn::model_differences(f.cfg.model, cfg.model).empty());
  Generator g(2);
  nn::CausalLM m(f.cfg.model, test::init_context(g));
  train::load_weights(f.weights_dir, m);
  autograd::NoGradGuard ng;
  const Tensor ids = ops::randint({1, 12}, 0, 256, DType::int64, Device::cpu(), &g);
  const Tensor full = m.logits(ids);
  std::vector<nn::LayerState> states(3);
  for (int64_t t = 0; t < 12; ++t) {
    const Tensor step = m.step(ops::contiguous(ops::slice(ids, 1, t, t + 1)), states);
    const std::vector<double> a = step.to_vector();
    const std::vector<double> b = ops::contiguous(ops::slice(full, 1, t, t + 1)).to_vector();
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], 1e-4) << "token " << t;
  }
}

}  // namespace
}  // namespace gdn
