// A short training run on CUDA matches the CPU run's loss curve (fp32, same seed, same data),
// and the same CUDA run twice gives the same curve bit for bit. Label `gpu`.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "src/train/trainer.h"
#include "tests/test_util.h"

GDN_TEST_REQUIRES_CUDA();

namespace gdn {
namespace {

namespace fs = std::filesystem;

std::vector<double> train_losses(const std::string& device, const std::string& run,
                                 const std::string& root) {
  const fs::path corpus = fs::path(root) / "corpus";
  if (!fs::exists(corpus)) {
    fs::create_directories(corpus);
    for (int f = 0; f < 4; ++f) {
      std::ofstream out(corpus / ("doc" + std::to_string(f) + ".txt"));
      for (int i = 0; i < 300; ++i) out << "lorem ipsum dolor " << (i * 5 + f) % 11 << " sit\n";
    }
  }
  train::RunConfig c =
      train::parse_run_config(R"(
model:
  hidden_size: 64
  num_hidden_layers: 2
  num_heads: 2
  head_dim: 32
  expand_v: 1.0
  vocab_size: 256
  kernel: chunked
data:
  seq_len: 64
train:
  steps: 6
  batch_size: 2
  lr: 2.0e-3
  warmup_steps: 2
  eval_every: 0
  save_every: 0
  log_every: 1
)",
                              "cuda_train.yaml",
                              {"data.inputs=[" + corpus.string() + "]", "train.device=" + device,
                               "train.out_dir=" + (fs::path(root) / run).string()});
  if (run != "cpu") c.data.dir = (fs::path(root) / "cpu" / "data").string();
  train::TrainerOptions o;
  o.quiet = true;
  train::Trainer t(c, o);
  t.run();
  std::vector<double> losses;
  std::ifstream f(fs::path(root) / run / "metrics.jsonl");
  std::string line;
  while (std::getline(f, line)) {
    auto j = nlohmann::json::parse(line);
    if (j.contains("loss")) losses.push_back(j["loss"]);
  }
  return losses;
}

TEST(CudaTrain, MatchesCpuLossCurve) {
  const std::string root = (fs::temp_directory_path() / "gdn_test_cuda_train").string();
  fs::remove_all(root);
  auto cpu = train_losses("cpu", "cpu", root);
  auto gpu = train_losses("cuda", "cuda", root);
  auto gpu2 = train_losses("cuda", "cuda2", root);
  ASSERT_EQ(cpu.size(), 6u);
  ASSERT_EQ(gpu.size(), cpu.size());
  for (size_t i = 0; i < cpu.size(); ++i) EXPECT_NEAR(gpu[i], cpu[i], 2e-3 * cpu[i]) << i;
  EXPECT_EQ(gpu, gpu2);  // deterministic
}

}  // namespace
}  // namespace gdn
