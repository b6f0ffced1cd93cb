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

// Hidden 32, 3 layers of 2 heads of 16, byte vocab; layer 1 is attention (2 query heads sharing
// one kv head, a window of 8). The tiny text run's data and schedule.
train::RunConfig hybrid_run(const std::string& root, const std::string& run) {
  const fs::path corpus = fs::path(root) / "corpus";
  const std::string yaml = test::model_yaml({32, 3, 2, 16, 256, 16}) + R"(  attn:
    layers: [1]
    num_heads: 2
    num_kv_heads: 1
    window_size: 8
data:
  seq_len: 24
  val_fraction: 0.2
train:
  steps: 8
  batch_size: 2
  grad_accum: 2
  lr: 3.0e-3
  warmup_steps: 2
  eval_every: 4
  eval_batches: 2
  save_every: 100
  log_every: 1
  device: cpu
)";
  return train::parse_run_config(
      yaml, "hybrid.yaml",
      {"data.inputs=[" + corpus.string() + "]", "train.out_dir=" + (fs::path(root) / run).string(),
       "train.seed=3"});
}

TEST(HybridRun, TrainsAndResumesBitForBit) {
  const std::string root = test::fresh_dir("gdn_test_hybrid_run");
  test::write_tiny_corpus(fs::path(root) / "corpus");
  train::TrainerOptions quiet;
  quiet.quiet = true;
  train::RunConfig a = hybrid_run(root, "a");
  ASSERT_EQ(a.model.token_mixer(1), "attention");
  {
    train::Trainer t(a, quiet);
    EXPECT_NE(dynamic_cast<nn::Attention*>(t.model().model->layers[1]->attn.get()), nullptr);
    EXPECT_EQ(t.run().step, 8);
  }
  train::RunConfig b = hybrid_run(root, "b");
  b.data.dir = (fs::path(root) / "a" / "data").string();  // same shards
  {
    train::TrainerOptions o = quiet;
    o.stop_after = 3;
    train::Trainer t(b, o);
    EXPECT_EQ(t.run().step, 3);
  }
  {
    train::TrainerOptions o = quiet;
    o.resume = (fs::path(root) / "b").string();
    train::Trainer t(b, o);
    EXPECT_EQ(t.state().step, 3);
    EXPECT_EQ(t.run().step, 8);
  }
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
