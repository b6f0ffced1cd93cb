// The trainer: a tiny model overfits a fixed batch, resume equals the uninterrupted run bit for
// bit, a non-finite loss is caught (and never checkpointed), runs are deterministic.
#include <gtest/gtest.h>

#include <filesystem>

#include "layers/model.h"
#include "optim/adamw.h"
#include "src/ops/ops.h"
#include "src/train/trainer.h"
#include "tests/test_helpers.h"
#include "tests/tiny_runs.h"

namespace gdn {
namespace {

namespace fs = std::filesystem;

// A clean directory holding the tiny run's corpus.
std::string fresh_dir(const std::string& name) {
  const std::string root = test::fresh_dir("gdn_test_train_" + name);
  test::write_tiny_corpus(fs::path(root) / "corpus");
  return root;
}

TEST(Train, TinyModelOverfitsAFixedBatch) {
  // Hidden 32, 1 layer, 2 heads of 16, vocab 16, chunks of 16.
  const nn::ModelConfig c = test::model_config({32, 1, 2, 16, 16, 16});
  Generator g(1);
  nn::CausalLM m(c, test::init_context(g));
  optim::AdamWOptions o;
  o.lr = 1e-2;
  optim::AdamW opt({{{}, m.parameters(), 0.0, 1.0}}, o);
  Tensor ids = ops::randint({2, 12}, 0, 16, DType::int64, Device::cpu(), &g);
  Tensor tgt = ops::randint({2, 12}, 0, 16, DType::int64, Device::cpu(), &g);
  double loss = 0;
  for (int step = 0; step < 150; ++step) {
    opt.zero_grad();
    Tensor l = m.loss(ids, tgt);
    l.backward();
    opt.step();
    loss = l.item();
  }
  EXPECT_LT(loss, 0.1);
}

TEST(Train, ResumeEqualsUninterrupted) {
  const std::string root = fresh_dir("resume");
  train::TrainerOptions quiet;
  quiet.quiet = true;
  // Uninterrupted; interrupted after 3 steps (saved), then resumed from the run directory.
  train::RunConfig b = test::tiny_text_run(root, "b");
  b.data.dir = (fs::path(root) / "a" / "data").string();  // a's shards
  test::train_whole_and_resumed(test::tiny_text_run(root, "a"), b, 3, 8);
  auto la = test::loss_curve((fs::path(root) / "a").string());
  auto lb = test::loss_curve((fs::path(root) / "b").string());
  EXPECT_EQ(la.size(), 8u + 2u);
  EXPECT_EQ(la, lb);  // bit for bit
  // The final weights too.
  train::RunConfig ra = test::tiny_text_run(root, "a"), rb = test::tiny_text_run(root, "b");
  rb.data.dir = b.data.dir;
  train::TrainerOptions ro = quiet;
  ro.read_only = true;
  ro.resume = (fs::path(root) / "a").string();
  train::Trainer ta(ra, ro);
  ro.resume = (fs::path(root) / "b").string();
  train::Trainer tb(rb, ro);
  auto pa = ta.model().named_parameters(), pb = tb.model().named_parameters();
  for (size_t i = 0; i < pa.size(); ++i)
    EXPECT_EQ(pa[i].second.to_vector(), pb[i].second.to_vector()) << pa[i].first;
  EXPECT_EQ(ta.evaluate().loss, tb.evaluate().loss);
  // Resuming a finished run does nothing.
  ro.read_only = false;
  train::Trainer again(rb, ro);
  EXPECT_EQ(again.run().step, 8);
}

TEST(Train, NonFiniteLossStopsWithoutCheckpoint) {
  const std::string root = fresh_dir("nonfinite");
  train::RunConfig c = test::tiny_text_run(root, "run");
  train::TrainerOptions o;
  o.quiet = true;
  {
    train::Trainer t(c, o);
    Tensor* w = t.model().find_parameter("model.norm.weight");
    ops::fill_(*w, std::nan(""));
    try {
      t.run();
      FAIL() << "expected an error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("non-finite loss at step 1"), std::string::npos)
          << e.what();
      // The run saved nothing yet: the message says so instead of pointing to a checkpoint.
      EXPECT_NE(std::string(e.what()).find("No checkpoint was saved before it"), std::string::npos)
          << e.what();
    }
  }
  EXPECT_FALSE(fs::exists(fs::path(root) / "run" / "checkpoints"));
  // With on_nonfinite: skip, the bad steps are counted and the weights are not touched.
  c.train.on_nonfinite = train::OnNonfinite::skip;
  c.train.steps = 2;
  train::Trainer t(c, o);
  Tensor* w = t.model().find_parameter("model.layers.0.attn.q_proj.weight");
  const auto before = w->to_vector();
  ops::fill_(*t.model().find_parameter("model.norm.weight"), std::nan(""));
  EXPECT_EQ(t.run().skipped_steps, 2);
  EXPECT_EQ(w->to_vector(), before);
}

TEST(Train, SameSeedSameCurve) {
  const std::string root = fresh_dir("determinism");
  train::TrainerOptions o;
  o.quiet = true;
  train::RunConfig a = test::tiny_text_run(root, "a"), b = test::tiny_text_run(root, "b");
  b.data.dir = (fs::path(root) / "a" / "data").string();
  a.train.steps = b.train.steps = 4;
  {
    train::Trainer t(a, o);
    t.run();
  }
  {
    train::Trainer t(b, o);
    t.run();
  }
  EXPECT_EQ(test::loss_curve((fs::path(root) / "a").string()),
            test::loss_curve((fs::path(root) / "b").string()));
}

}  // namespace
}  // namespace gdn
