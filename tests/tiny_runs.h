// Small models and training runs shared by the tests: the one place that sets up a model of
// given sizes (as the `model:` YAML of a run, or as the ModelConfig that YAML parses to), the
// init context of a seeded model, a text corpus, the tiny text run of the trainer tests and the
// loss curve a run logged, a run trained whole and in two parts.
#pragma once
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "layers/config.h"
#include "layers/linear.h"
#include "src/train/run_config.h"
#include "src/train/trainer.h"

namespace gdn::test {

// The sizes of a small model: everything else keeps ModelConfig's defaults, but expand_v is 1
// and the kernel chunked.
struct TinyModel {
  int64_t hidden_size, num_hidden_layers, num_heads, head_dim, vocab_size;
  int64_t chunk_size = 0;  // 0: ModelConfig's default
};

// The `model:` section of a run config for these sizes.
inline std::string model_yaml(const TinyModel& m) {
  std::ostringstream y;
  y << "model:\n"
    << "  hidden_size: " << m.hidden_size << "\n"
    << "  num_hidden_layers: " << m.num_hidden_layers << "\n"
    << "  num_heads: " << m.num_heads << "\n"
    << "  head_dim: " << m.head_dim << "\n"
    << "  expand_v: 1.0\n"
    << "  vocab_size: " << m.vocab_size << "\n"
    << "  kernel: chunked\n";
  if (m.chunk_size > 0) y << "  chunk_size: " << m.chunk_size << "\n";
  return y.str();
}

// The ModelConfig of model_yaml(m): built by the config parser, so models made in code and
// models of run configs are set up alike.
inline nn::ModelConfig model_config(const TinyModel& m) {
  return train::parse_run_config(model_yaml(m), "tiny_model.yaml").model;
}

// Parameters on the cpu in `dtype`, initialized from g.
inline nn::InitContext init_context(Generator& g, DType dtype = DType::float32) {
  nn::InitContext ctx;
  ctx.dtype = dtype;
  ctx.gen = &g;
  return ctx;
}

// Writes doc0.txt .. doc<files - 1>.txt into dir (created), each of `lines` lines line(file, i).
inline void write_corpus(const std::filesystem::path& dir, int files, int lines,
                         const std::function<std::string(int file, int line)>& line) {
  std::filesystem::create_directories(dir);
  for (int f = 0; f < files; ++f) {
    std::ofstream out(dir / ("doc" + std::to_string(f) + ".txt"));
    for (int i = 0; i < lines; ++i) out << line(f, i) << "\n";
  }
}

// The corpus of tiny_text_run: 6 files of 200 short lines of a few distinct words and numbers.
inline void write_tiny_corpus(const std::filesystem::path& dir) {
  write_corpus(dir, 6, 200, [](int f, int i) {
    return "the quick brown fox " + std::to_string((i * 7 + f) % 13) + " jumps";
  });
}

// The tiny text run of the trainer tests: 2 layers of hidden 32 (chunks of 16) on the corpus in
// ROOT/corpus (see write_tiny_corpus), 8 steps of 2 micro-batches of 2 rows of 24 tokens,
// validation every 4 steps, seed 3, written to ROOT/RUN. `extra` overrides come last.
inline train::RunConfig tiny_text_run(const std::string& root, const std::string& run,
                                      const std::vector<std::string>& extra = {},
                                      const TinyModel& model = {32, 2, 2, 16, 256, 16},
                                      const std::string& model_extra = "") {
  const std::filesystem::path corpus = std::filesystem::path(root) / "corpus";
  const std::string yaml = model_yaml(model) + model_extra + R"(data:
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
  std::vector<std::string> sets = {"data.inputs=[" + corpus.string() + "]",
                                   "train.out_dir=" + (std::filesystem::path(root) / run).string(),
                                   "train.seed=3"};
  sets.insert(sets.end(), extra.begin(), extra.end());
  return train::parse_run_config(yaml, "tiny.yaml", sets);
}

// Trains `whole` uninterrupted, and `parts` (the same run in another directory, reading whole's
// shards) stopped after `stop` steps and resumed from its run directory: both end at `steps`.
inline void train_whole_and_resumed(const train::RunConfig& whole, train::RunConfig parts,
                                    int64_t stop, int64_t steps) {
  train::TrainerOptions quiet;
  quiet.quiet = true;
  {
    train::Trainer t(whole, quiet);
    EXPECT_EQ(t.run().step, steps);
  }
  parts.data.dir = (std::filesystem::path(whole.train.out_dir) / "data").string();
  {
    train::TrainerOptions o = quiet;
    o.stop_after = stop;
    train::Trainer t(parts, o);
    EXPECT_EQ(t.run().step, stop);
  }
  train::TrainerOptions o = quiet;
  o.resume = parts.train.out_dir;
  train::Trainer t(parts, o);
  EXPECT_EQ(t.state().step, stop);
  EXPECT_EQ(t.run().step, steps);
}

// The losses RUN_DIR/metrics.jsonl holds, in log order: training losses, and validation losses
// plus 1000 (the null loss of a skipped step is left out).
inline std::vector<double> loss_curve(const std::string& run_dir) {
  std::vector<double> out;
  std::ifstream f(std::filesystem::path(run_dir) / "metrics.jsonl");
  std::string line;
  while (std::getline(f, line)) {
    auto j = nlohmann::json::parse(line);
    if (j.contains("loss") && !j["loss"].is_null()) out.push_back(j["loss"]);
    if (j.contains("val_loss")) out.push_back(1000 + double(j["val_loss"]));
  }
  return out;
}

}  // namespace gdn::test
