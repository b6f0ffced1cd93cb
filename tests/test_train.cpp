// The trainer: a tiny model overfits a fixed batch, resume equals the uninterrupted run bit for
// bit, a non-finite loss is caught (and never checkpointed), runs are deterministic.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "layers/model.h"
#include "optim/adamw.h"
#include "src/ops/ops.h"
#include "src/train/trainer.h"
#include "tests/test_util.h"

namespace gdn {
namespace {

namespace fs = std::filesystem;

std::string fresh_dir(const std::string& name) {
  fs::path p = fs::temp_directory_path() / ("gdn_test_train_" + name);
  fs::remove_all(p);
  fs::create_directories(p);
  return p.string();
}

// A small text corpus and a tiny model config.
train::RunConfig tiny_run(const std::string& root, const std::string& run) {
  const fs::path corpus = fs::path(root) / "corpus";
  if (!fs::exists(corpus)) {
    fs::create_directories(corpus);
    for (int f = 0; f < 6; ++f) {
      std::ofstream out(corpus / ("doc" + std::to_string(f) + ".txt"));
      for (int i = 0; i < 200; ++i) out << "the quick brown fox " << (i * 7 + f) % 13 << " jumps\n";
    }
  }
  const std::string yaml = R"(
model:
  hidden_size: 32
  num_hidden_layers: 2
  num_heads: 2
  head_dim: 16
  expand_v: 1.0
  vocab_size: 256
  kernel: chunked
  chunk_size: 16
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
      yaml, "tiny.yaml",
      {"data.inputs=[" + corpus.string() + "]", "train.out_dir=" + (fs::path(root) / run).string(),
       "train.seed=3"});
}

std::vector<double> losses_of(const std::string& metrics) {
  std::vector<double> out;
  std::ifstream f(metrics);
  std::string line;
  while (std::getline(f, line)) {
    auto j = nlohmann::json::parse(line);
    if (j.contains("loss") && !j["loss"].is_null()) out.push_back(j["loss"]);
    if (j.contains("val_loss")) out.push_back(1000 + double(j["val_loss"]));
  }
  return out;
}

TEST(Train, TinyModelOverfitsAFixedBatch) {
  nn::ModelConfig c;
  c.hidden_size = 32;
  c.num_hidden_layers = 1;
  c.num_heads = 2;
  c.head_dim = 16;
  c.expand_v = 1.0;
  c.vocab_size = 16;
  c.chunk_size = 16;
  Generator g(1);
  nn::InitContext ctx;
  ctx.gen = &g;
  nn::CausalLM m(c, ctx);
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
  // Uninterrupted.
  train::RunConfig a = tiny_run(root, "a");
  {
    train::Trainer t(a, quiet);
    EXPECT_EQ(t.run().step, 8);
  }
  // Interrupted after 3 steps (saved), then resumed from the run directory.
  train::RunConfig b = tiny_run(root, "b");
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
  auto la = losses_of((fs::path(root) / "a" / "metrics.jsonl").string());
  auto lb = losses_of((fs::path(root) / "b" / "metrics.jsonl").string());
  EXPECT_EQ(la.size(), 8u + 2u);
  EXPECT_EQ(la, lb);  // bit for bit
  // The final weights too.
  train::RunConfig ra = tiny_run(root, "a"), rb = tiny_run(root, "b");
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
  train::RunConfig c = tiny_run(root, "run");
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
    }
  }
  EXPECT_FALSE(fs::exists(fs::path(root) / "run" / "checkpoints"));
  // With on_nonfinite: skip, the bad steps are counted and the weights are not touched.
  c.train.on_nonfinite = "skip";
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
  train::RunConfig a = tiny_run(root, "a"), b = tiny_run(root, "b");
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
  EXPECT_EQ(losses_of((fs::path(root) / "a" / "metrics.jsonl").string()),
            losses_of((fs::path(root) / "b" / "metrics.jsonl").string()));
}

}  // namespace
}  // namespace gdn
