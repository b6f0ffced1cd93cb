// A short training run on CUDA matches the CPU run's loss curve (fp32, same seed, same data),
// and the same CUDA run twice gives the same curve bit for bit. Label `gpu`.
#include <gtest/gtest.h>

#include <filesystem>

#include "src/train/trainer.h"
#include "tests/test_helpers.h"
#include "tests/test_util.h"
#include "tests/tiny_runs.h"

GDN_TEST_REQUIRES_CUDA();

namespace gdn {
namespace {

namespace fs = std::filesystem;

// The training losses of a 6-step run on `device` (hidden 64, 2 layers) over a small corpus,
// written to ROOT/RUN; the runs after the "cpu" one read its shards.
std::vector<double> train_losses(const std::string& device, const std::string& run,
                                 const std::string& root) {
  const fs::path corpus = fs::path(root) / "corpus";
  if (!fs::exists(corpus)) {
    test::write_corpus(corpus, 4, 300, [](int f, int i) {
      return "lorem ipsum dolor " + std::to_string((i * 5 + f) % 11) + " sit";
    });
  }
  train::RunConfig c =
      train::parse_run_config(test::model_yaml({64, 2, 2, 32, 256}) + R"(data:
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
  return test::loss_curve((fs::path(root) / run).string());  // no validation: losses only
}

TEST(CudaTrain, MatchesCpuLossCurve) {
  const std::string root = test::fresh_dir("gdn_test_cuda_train");
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
