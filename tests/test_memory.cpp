// Memory accounting: the meta prediction of a training step equals a real cpu run of the same
// config (within 2% on the peak and on every category); checkpointing and bf16 shrink the
// saved activations as they should; the fused loss never holds the full logits.
#include <gtest/gtest.h>

#include "src/train/memory_profile.h"
#include "tests/tiny_runs.h"

namespace gdn {
namespace {

// Hidden 64, 2 layers of 2 heads of 32, vocab 512; batch 2; `extra`: more train keys.
train::RunConfig small(const std::string& extra = "") {
  return train::parse_run_config(
      test::model_yaml({64, 2, 2, 32, 512}) + "train:\n  batch_size: 2\n" + extra, "small.yaml");
}

void expect_close(int64_t meta, int64_t cpu, const std::string& what) {
  const double tol = 0.02 * double(std::max<int64_t>(cpu, 1));
  EXPECT_LE(std::abs(double(meta - cpu)), tol) << what << ": meta " << meta << " cpu " << cpu;
}

TEST(Memory, MetaPredictsCpu) {
  for (const char* ckpt : {"none", "block", "kernel"}) {
    train::RunConfig c = small(std::string("  checkpointing: ") + ckpt + "\n");
    auto meta = train::profile_training_step(c, "meta", 2, 96);
    auto cpu = train::profile_training_step(c, "cpu", 2, 96);
    EXPECT_GT(cpu.peak_bytes, 0);
    expect_close(meta.peak_bytes, cpu.peak_bytes, std::string("peak ") + ckpt);
    for (int k = 0; k < kNumMemCategories; ++k) {
      expect_close(meta.peak_by_category[size_t(k)], cpu.peak_by_category[size_t(k)],
                   std::string("at peak: ") + mem_category_name(MemCategory(k)));
      expect_close(meta.max_by_category[size_t(k)], cpu.max_by_category[size_t(k)],
                   std::string("max: ") + mem_category_name(MemCategory(k)));
    }
    EXPECT_EQ(meta.saved_total, cpu.saved_total);
    EXPECT_EQ(meta.peak_phase, cpu.peak_phase);
  }
}

TEST(Memory, CategoriesAddUp) {
  auto p = train::profile_training_step(small(), "meta", 2, 64);
  int64_t sum = 0;
  for (int64_t b : p.peak_by_category) sum += b;
  EXPECT_EQ(sum, p.peak_bytes);
  // fp32 params, AdamW moments = 2x params.
  EXPECT_EQ(p.max_by_category[int(MemCategory::param)], 4 * p.params);
  EXPECT_EQ(p.max_by_category[int(MemCategory::optim)], 8 * p.params);
  EXPECT_GT(p.saved_by_kind.count("kernel_residuals"), 0u);
  EXPECT_EQ(p.saved_by_block.count("model.layers.1"), 1u);
}

TEST(Memory, CheckpointingAndBf16ShrinkActivations) {
  const int64_t seq = 256;
  auto none = train::profile_training_step(small(), "meta", 2, seq);
  auto block = train::profile_training_step(small("  checkpointing: block\n"), "meta", 2, seq);
  auto kernel = train::profile_training_step(small("  checkpointing: kernel\n"), "meta", 2, seq);
  auto bf16 = train::profile_training_step(small("  dtype: bfloat16\n"), "meta", 2, seq);
  EXPECT_LT(block.saved_total, kernel.saved_total);
  EXPECT_LT(kernel.saved_total, none.saved_total);
  EXPECT_LT(bf16.saved_total, none.saved_total);
  // Block checkpointing keeps one [B, T, d] input per block (fp32), plus the head.
  EXPECT_EQ(block.saved_by_kind.at("checkpoint_inputs"), 2 * 2 * seq * 64 * 4);
}

TEST(Memory, FusedLossNeverHoldsAllLogits) {
  // vocab 8192 x 4096 tokens of fp32 logits would be 128 MiB; chunked, a 32 MiB chunk and its
  // gradient are live at a time.
  train::RunConfig c = small();
  c.model.vocab_size = 8192;
  auto p = train::profile_training_step(c, "meta", 4, 1024);
  const int64_t full_logits = int64_t(4) * 1024 * 8192 * 4;
  EXPECT_LT(p.max_by_category[int(MemCategory::temp)], full_logits * 3 / 4);
}

TEST(Memory, BudgetsAndSuggestions) {
  EXPECT_EQ(train::parse_bytes("24GiB"), int64_t(24) << 30);
  EXPECT_EQ(train::parse_bytes("1.5 MB"), 1500000);
  EXPECT_THROW(train::parse_bytes("12 parsecs"), Error);
  train::RunConfig c = small();
  auto p = train::profile_training_step(c, "meta", 8, 512);
  const int64_t budget = p.peak_bytes * 6 / 10;
  auto s = train::suggest_fits(c, 8, 512, budget, 0);
  bool any = false;
  for (const auto& f : s) {
    any = any || f.fits;
    if (f.fits) {
      EXPECT_LE(f.peak_bytes, budget);
    }
  }
  EXPECT_TRUE(any);
}

}  // namespace
}  // namespace gdn
