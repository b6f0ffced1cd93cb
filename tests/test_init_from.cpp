// train.init_from: a new run from a model's weights (src/train/init_from.h). With lr 0 the
// weights it saves are the model's, bit for bit, and its first loss is the model's loss on that
// batch; a YAML that describes another model is refused naming the key; init_strict: false grows
// a model by one layer, loading what matches and listing the rest; trainer_state.json says where
// the run started.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "src/io/safetensors.h"
#include "src/train/data_source.h"
#include "src/train/init_from.h"
#include "src/train/model_dir.h"
#include "src/train/model_io.h"
#include "src/train/trainer.h"
#include "tests/test_helpers.h"
#include "tests/tiny_runs.h"

namespace gdn::train {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

TrainerOptions quiet() {
  TrainerOptions o;
  o.quiet = true;
  return o;
}

json read_json(const fs::path& p) {
  std::ifstream f(p);
  return json::parse(f);
}

// A trained tiny run to start from: ROOT/base (2 steps, a checkpoint at step 2).
std::string base_run(const test::TempDir& root) {
  test::write_tiny_corpus(root.path / "corpus");
  Trainer t(
      test::tiny_text_run(root.path.string(), "base", {"train.steps=2", "train.save_every=2"}),
      quiet());
  t.run();
  return root.file("base");
}

TEST(InitFrom, ZeroLearningRateKeepsTheWeightsAndTheFirstLossIsTheModels) {
  test::TempDir root;
  const std::string base = base_run(root);
  const RunConfig cfg =
      test::tiny_text_run(root.path.string(), "next",
                          {"train.steps=2", "train.save_every=2", "train.lr=0", "train.min_lr=0",
                           "train.warmup_steps=0", "train.grad_accum=1", "train.eval_every=0",
                           "train.init_from=" + base});
  Trainer t(cfg, quiet());
  t.run();
  const std::string from = init_model_dir(base), to = init_model_dir(root.file("next"));
  auto a = io::load_safetensors((fs::path(from) / "model.safetensors").string());
  auto b = io::load_safetensors((fs::path(to) / "model.safetensors").string());
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].first, b[i].first);
    EXPECT_EQ(a[i].second.to_vector(), b[i].second.to_vector()) << a[i].first;  // bit-exact
  }
  // The first step's loss is the base model's on the run's first batch.
  const ModelDir md = resolve_model_dir(base);
  Generator g(0);
  const auto model = load_model(md, load_config_json(md.dir), test::init_context(g));
  auto data = make_data_source(t.config(), root.file("next"));
  const double want = batch_loss(*model, data->next(), Device::cpu()).item();
  EXPECT_NEAR(test::loss_curve(root.file("next")).front(), want, 1e-6 * std::abs(want));
  // Where it started: the directory and a hash of its weights.
  const json state = read_json(fs::path(to) / "trainer_state.json");
  EXPECT_EQ(state["init_from"]["dir"], from);
  EXPECT_EQ(state["init_from"]["weights_hash"].get<std::string>().size(), 16u);
  EXPECT_EQ(state["init_from"]["strict"], true);
}

TEST(InitFrom, AYamlThatDescribesAnotherModelIsRefusedNamingTheKey) {
  test::TempDir root;
  const std::string base = base_run(root);
  const RunConfig cfg = test::tiny_text_run(root.path.string(), "wider",
                                            {"train.init_from=" + base, "model.hidden_size=64"});
  const std::string e = test::error_of([&] { Trainer t(cfg, quiet()); });
  EXPECT_NE(e.find("describe different models: hidden_size (64 vs 32)"), std::string::npos) << e;
}

TEST(InitFrom, ALenientStartGrowsTheModelByALayer) {
  test::TempDir root;
  const std::string base = base_run(root);
  const RunConfig cfg = test::tiny_text_run(
      root.path.string(), "deeper",
      {"train.steps=1", "train.save_every=1", "train.init_from=" + base, "train.init_strict=false"},
      {32, 3, 2, 16, 256, 16});
  Trainer t(cfg, quiet());
  t.run();
  const json init =
      read_json(fs::path(init_model_dir(root.file("deeper"))) / "trainer_state.json")["init_from"];
  EXPECT_EQ(init["strict"], false);
  std::vector<std::string> fresh = init["fresh"];
  ASSERT_FALSE(fresh.empty());
  for (const std::string& name : fresh) EXPECT_EQ(name.rfind("model.layers.2.", 0), 0u) << name;
  std::vector<std::string> loaded = init["loaded"];
  EXPECT_NE(std::find(loaded.begin(), loaded.end(), "model.embeddings.weight"), loaded.end());
  EXPECT_TRUE(init["skipped"].empty());
}

}  // namespace
}  // namespace gdn::train
