// Prompt-masked fine-tuning data: the loss mask file (format and its errors), prepare_data on
// prompt/completion JSON Lines (ids and flags), the loaders' -100 targets (windows and packed
// rows), and the step's loss and gradients over masked micro-batches of unequal scored counts
// against the mean over just the scored targets, written out by hand in fp64.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>

#include "src/data/loader.h"
#include "src/data/meta.h"
#include "src/data/prepare.h"
#include "src/data/shard.h"
#include "src/ops/ops.h"
#include "src/train/data_source.h"
#include "src/train/trainer.h"
#include "tests/test_helpers.h"
#include "tests/test_util.h"
#include "tests/tiny_runs.h"

namespace gdn {
namespace {

namespace fs = std::filesystem;
using test::error_of;

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

std::vector<int32_t> bytes_of(const std::string& s) {
  return std::vector<int32_t>(s.begin(), s.end());
}

constexpr int32_t kEos = 257;  // the byte tokenizer of vocab 258

// ---- the file ---------------------------------------------------------------------------------

TEST(LossMask, FileRoundTripsAndNamesWhatIsWrong) {
  test::TempDir dir;
  const std::string tokens = dir.file("train.bin"), mask = data::loss_mask_path(tokens);
  EXPECT_EQ(mask, dir.file("train.mask.bin"));
  data::write_shard(tokens, {5, 6, 7, 8}, 258);
  {
    data::ShardWriter w(mask, 2, 1, data::ShardKind::loss_mask);
    w.append({0, 1, 1, 0});
    w.finish();
  }
  EXPECT_EQ(fs::file_size(mask), uint64_t(data::kShardHeaderBytes + 4));
  EXPECT_EQ(test::read_file(mask).substr(0, 8), std::string("GDNMASK\0", 8));
  auto s = data::Shard::open_masked(tokens, mask);
  ASSERT_NE(s->loss_mask(), nullptr);
  EXPECT_EQ(s->loss_mask()->read(0, 4), (std::vector<int32_t>{0, 1, 1, 0}));
  EXPECT_EQ(data::Shard::open(tokens)->loss_mask(), nullptr);

  // A flag other than 0/1 cannot be written, and is found when read.
  EXPECT_TRUE(has(error_of([&] {
                    data::ShardWriter w(dir.file("x.mask.bin"), 2, 1, data::ShardKind::loss_mask);
                    w.append({0, 2});
                  }),
                  "token 2 at index 1 is outside the vocabulary [0, 2)"));
  std::string bytes = test::read_file(mask);
  bytes[data::kShardHeaderBytes + 2] = 3;
  test::write_file(mask, bytes);
  std::string e = error_of([&] { data::Shard::open_masked(tokens, mask); });
  EXPECT_TRUE(has(e, "loss mask '" + mask + "': flag 3 at index 2 (byte offset 66)")) << e;

  // A token shard is not a mask; a mask of another length does not fit the shard.
  e = error_of([&] { data::Shard::open_masked(tokens, tokens); });
  EXPECT_TRUE(has(e, "bad magic at byte offset 0: expected \"GDNMASK\\0\"")) << e;
  EXPECT_TRUE(has(e, "not a gdn loss mask")) << e;
  {
    data::ShardWriter w(mask, 2, 1, data::ShardKind::loss_mask);
    w.append({1, 1, 1});
    w.finish();
  }
  e = error_of([&] { data::Shard::open_masked(tokens, mask); });
  EXPECT_TRUE(
      has(e, "holds 3 flags (byte offset 16), but its token shard '" + tokens + "' holds 4 tokens"))
      << e;
  bytes = test::read_file(mask);
  bytes[8] = 2;  // version
  test::write_file(mask, bytes);
  e = error_of([&] { data::Shard::open_masked(tokens, mask); });
  EXPECT_TRUE(has(e, "unsupported version at byte offset 8: expected 1, got 2")) << e;
}

// ---- preparation ------------------------------------------------------------------------------

// Two pairs and a plain document, all in train; byte tokenizer with eos.
data::PrepareSummary prepare_pairs(const test::TempDir& dir, const std::string& jsonl,
                                   const std::string& out = "data") {
  test::write_file(dir.file("sft.jsonl"), jsonl);
  data::PrepareOptions o;
  o.inputs = {dir.file("sft.jsonl")};
  o.vocab_size = 258;
  o.out_dir = dir.file(out);
  o.val_fraction = 0;
  o.progress = false;
  return data::prepare_data(o);
}

const char* kPairs =
    "{\"prompt\": \"Q1?\", \"completion\": \" A1.\"}\n"
    "{\"text\": \"plain doc\"}\n"
    "{\"prompt\": \"\", \"completion\": \"only\", \"id\": 3}\n";

TEST(LossMask, PrepareTokenizesPromptThenCompletionAndFlagsTheCompletion) {
  test::TempDir dir;
  const data::PrepareSummary s = prepare_pairs(dir, kPairs);
  EXPECT_EQ(s.pair_documents, 2);
  std::vector<int32_t> want, flags;
  auto add = [&](const std::string& text, int32_t flag) {
    for (int32_t id : bytes_of(text)) want.push_back(id), flags.push_back(flag);
  };
  add("Q1?", 0), add(" A1.", 1), want.push_back(kEos), flags.push_back(1);
  add("plain doc", 1), want.push_back(kEos), flags.push_back(1);
  add("only", 1), want.push_back(kEos), flags.push_back(1);
  data::PreparedData p = data::open_prepared(dir.file("data"));
  ASSERT_TRUE(p.loss_masked());
  EXPECT_EQ(p.train->read(0, p.train->size()), want);
  EXPECT_EQ(p.train->loss_mask()->read(0, p.train->size()), flags);
  EXPECT_EQ(s.train_scored, int64_t(flags.size()) - 3);
  EXPECT_EQ(p.val_bytes_per_token(), 0);  // bits per byte mean nothing over completions only
  const auto meta =
      nlohmann::json::parse(test::read_file((fs::path(dir.file("data")) / "meta.json").string()));
  EXPECT_EQ(meta["train"]["loss_mask"], "train.mask.bin");
  EXPECT_EQ(meta["val"]["loss_mask"], "val.mask.bin");
  EXPECT_EQ(meta["pair_documents"], 2);
  EXPECT_TRUE(has(data::format_summary(s), "loss mask: 20 of 23 train"));

  // Plain data prepared into the same directory leaves no stale mask behind.
  prepare_pairs(dir, "{\"text\": \"plain only\"}\n");
  EXPECT_FALSE(fs::exists(dir.file("data/train.mask.bin")));
  EXPECT_FALSE(data::open_prepared(dir.file("data")).loss_masked());

  // meta.json naming a mask that is gone is refused, naming the field.
  prepare_pairs(dir, kPairs);
  fs::remove(dir.file("data/val.mask.bin"));
  const std::string e = error_of([&] { data::open_prepared(dir.file("data")); });
  EXPECT_TRUE(has(e, "field \"val.loss_mask\" names val.mask.bin, which is not in")) << e;
}

TEST(LossMask, PairLinesNameTheirMissingOrBadFields) {
  test::TempDir dir;
  std::string e =
      error_of([&] { prepare_pairs(dir, "{\"completion\": \"x\", \"question\": \"q\"}\n"); });
  EXPECT_TRUE(has(e,
                  "line 1 (byte offset 0): no \"prompt\" field (its fields: completion, "
                  "question; --prompt-field and --completion-field name a pair's fields)"))
      << e;
  e = error_of([&] { prepare_pairs(dir, "{\"prompt\": \"q\", \"completion\": 7}\n"); });
  EXPECT_TRUE(has(e, "field \"completion\" is number, not a string")) << e;
  e = error_of([&] { prepare_pairs(dir, "{\"prompt\": \"q\"}\n"); });
  EXPECT_TRUE(has(e,
                  "no \"text\" field (its fields: prompt; --text-field picks another; a "
                  "fine-tuning pair has \"prompt\" and \"completion\")"))
      << e;
}

// Invalid UTF-8 inside a prompt is replaced in the prompt, so the seam stays at its end.
TEST(LossMask, TheSeamSurvivesUtf8Repair) {
  test::TempDir dir;
  test::write_file(dir.file("sft.jsonl"), "{\"prompt\": \"a\xff\", \"completion\": \"b\"}\n");
  data::PrepareOptions o;
  o.inputs = {dir.file("sft.jsonl")};
  o.tokenizer =
      (fs::path(std::getenv("GDN_TEST_DATA")) / "tokenizers" / "gpt2" / "tokenizer.json").string();
  o.out_dir = dir.file("data");
  o.val_fraction = 0;
  o.progress = false;
  data::prepare_data(o);
  data::PreparedData p = data::open_prepared(dir.file("data"));
  const std::vector<int32_t> ids = p.train->read(0, p.train->size());
  const std::vector<int32_t> flags = p.train->loss_mask()->read(0, p.train->size());
  std::vector<int32_t> prompt, completion;
  p.tokenizer->encode_append("a\xEF\xBF\xBD", prompt);
  p.tokenizer->encode_append("b", completion);
  const size_t eos = p.tokenizer->eos_id() >= 0 ? 1 : 0;
  ASSERT_EQ(ids.size(), prompt.size() + completion.size() + eos);
  for (size_t i = 0; i < ids.size(); ++i) EXPECT_EQ(flags[i], i < prompt.size() ? 0 : 1) << i;
}

// ---- loaders ----------------------------------------------------------------------------------

TEST(LossMask, WindowsScoreExactlyTheFlaggedTargets) {
  test::TempDir dir;
  prepare_pairs(dir, std::string(kPairs) + kPairs + kPairs);
  data::PreparedData p = data::open_prepared(dir.file("data"));
  const auto tokens = p.train->read(0, p.train->size());
  const auto flags = p.train->loss_mask()->read(0, p.train->size());
  data::LoaderOptions lo;
  lo.batch_size = 3;
  lo.seq_len = 7;
  lo.dtype = DType::int64;
  lo.prefetch = false;
  data::DataLoader loader(p.train, lo);
  int64_t masked = 0;
  for (int step = 0; step < 4; ++step) {
    const data::Batch b = loader.next();
    const auto tgt = test::ints(b.targets);
    for (int64_t r = 0; r < 3; ++r)
      for (int64_t t = 0; t < 7; ++t) {
        const size_t at = size_t(b.starts[size_t(r)] + t + 1);
        EXPECT_EQ(tgt[size_t(r * 7 + t)], flags[at] ? tokens[at] : -100) << r << " " << t;
        masked += flags[at] ? 0 : 1;
      }
  }
  EXPECT_GT(masked, 0);
}

// Packed rows: a document's first token is never a target, the rest count when flagged.
TEST(LossMask, PackedRowsScoreTheFlaggedTargetsOfEachDocument) {
  test::TempDir dir;
  prepare_pairs(dir, kPairs);
  data::PreparedData p = data::open_prepared(dir.file("data"));
  data::SequentialLoader loader(p.train, 4, 15, 0, 0, 1, DType::int64, kEos);
  data::Batch b;
  std::string scored;
  while (loader.next(b)) {
    const auto tok = test::ints(b.tokens), tgt = test::ints(b.targets);
    for (size_t i = 0; i < tgt.size(); ++i)
      if (tgt[i] != -100) scored.push_back(tgt[i] == kEos ? '$' : char(tgt[i]));
  }
  std::sort(scored.begin(), scored.end());
  std::string want = " A1.$" + std::string("lain doc$") + "nly$";
  std::sort(want.begin(), want.end());
  EXPECT_EQ(scored, want);
}

// ---- the step's loss and gradients ----------------------------------------------------------

std::unique_ptr<nn::CausalLM> fp64_model() {
  Generator g(11);
  auto m = std::make_unique<nn::CausalLM>(test::model_config({16, 2, 2, 8, 32, 16}),
                                          test::init_context(g, DType::float64));
  m->compute_dtype = DType::float64;
  return m;
}

// A micro-batch of random ids whose targets are -100 where `unscored` says (row-major B x T).
data::Batch masked_batch(uint64_t seed, int64_t rows, int64_t t, const std::vector<bool>& unscored,
                         std::vector<int64_t> cu_seqlens = {}) {
  Generator g(seed);
  data::Batch b;
  b.inputs = ops::randint({rows, t}, 0, 32, DType::int64, Device::cpu(), &g);
  std::vector<double> tgt =
      ops::randint({rows, t}, 0, 32, DType::int64, Device::cpu(), &g).to_vector();
  for (size_t i = 0; i < tgt.size(); ++i)
    if (unscored[i]) tgt[i] = -100;
  b.targets = ops::from_vector(tgt, {rows, t}, DType::int64);
  b.starts.assign(size_t(rows), 0);
  b.cu_seqlens = std::move(cu_seqlens);
  return b;
}

std::vector<bool> pattern(size_t n, size_t every, size_t offset) {
  std::vector<bool> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = (i + offset) % every != 0;
  return out;
}

// What masking means, written without -100: the mean of -log p(target) over the scored targets
// of every micro-batch, each target's term weighted 1 / N through a one-hot tensor.
Tensor reference_loss(const nn::CausalLM& m, const std::vector<data::Batch>& batches) {
  double n = 0;
  for (const auto& b : batches) n += double(train::scored_targets(b));
  Tensor total;
  for (const auto& b : batches) {
    const bool packed = !b.cu_seqlens.empty();
    Tensor logits =
        packed ? m.logits(ops::reshape(b.inputs, {1, -1}), b.cu_seqlens) : m.logits(b.inputs);
    const std::vector<double> tgt = b.targets.to_vector();
    std::vector<double> onehot(tgt.size() * 32, 0.0);
    for (size_t i = 0; i < tgt.size(); ++i)
      if (tgt[i] != -100) onehot[i * 32 + size_t(tgt[i])] = 1.0 / n;
    Tensor part = ops::neg(ops::sum(ops::mul(
        ops::log_softmax(logits, -1), ops::from_vector(onehot, logits.shape(), DType::float64))));
    total = total.defined() ? ops::add(total, part) : part;
  }
  return total;
}

TEST(LossMask, StepLossAndGradientsAreTheMeanOverScoredTargetsAcrossMicroBatches) {
  // Three micro-batches scoring 10, 30 and 8 of their targets; the last one packed.
  std::vector<bool> two_unscored(32, false);
  two_unscored[3] = two_unscored[17] = true;
  const std::vector<data::Batch> batches = {
      masked_batch(1, 2, 16, pattern(32, 3, 1)),
      masked_batch(2, 2, 16, two_unscored),
      masked_batch(3, 2, 8, pattern(16, 2, 0), {0, 5, 8, 11, 16}),
  };
  std::vector<int64_t> counts;
  for (const auto& b : batches) counts.push_back(train::scored_targets(b));
  ASSERT_EQ(counts, (std::vector<int64_t>{10, 30, 8}));

  auto a = fp64_model(), ref = fp64_model();
  const double loss =
      train::accumulate_step_gradients(*a, batches, counts, Device::cpu(), 48.0, 1, true);
  Tensor want = reference_loss(*ref, batches);
  want.backward();
  EXPECT_NEAR(loss, want.item(), 1e-13 * std::abs(want.item()));
  const auto pa = a->named_parameters(), pr = ref->named_parameters();
  ASSERT_EQ(pa.size(), pr.size());
  for (size_t i = 0; i < pa.size(); ++i)
    EXPECT_LT(test::rel_err(pa[i].second.grad(), pr[i].second.grad()), 1e-11) << pa[i].first;

  // The weighting matters: the plain mean of the micro-batch means misses by far more than the
  // tolerance above.
  double mean_of_means = 0;
  for (const auto& b : batches)
    mean_of_means += train::batch_loss(*ref, b, Device::cpu()).item() / 3;
  EXPECT_GT(std::abs(mean_of_means - loss), 1e-5 * loss);
}

// ---- a run ------------------------------------------------------------------------------------

// A run on prompt/completion data trains, and its validation loss is the mean over the scored
// targets of the val windows (the same number evaluate() reports).
TEST(LossMask, ARunOnPairsTrainsAndEvaluatesTheCompletions) {
  test::TempDir root;
  std::string lines;
  for (int i = 0; i < 120; ++i)
    lines += "{\"prompt\": \"what is " + std::to_string(i % 17) +
             " plus one? \", \"completion\": \"" + std::to_string(i % 17 + 1) + "\"}\n";
  fs::create_directories(root.path / "corpus");
  test::write_file((root.path / "corpus" / "sft.jsonl").string(), lines);
  train::TrainerOptions quiet;
  quiet.quiet = true;
  train::Trainer t(test::tiny_text_run(root.path.string(), "run",
                                       {"train.steps=2", "data.vocab_size=258",
                                        "model.vocab_size=258", "data.pack=documents"}),
                   quiet);
  EXPECT_TRUE(has(t.data().describe(), "loss on completions only")) << t.data().describe();
  t.run();
  const train::EvalStats s = t.evaluate();
  EXPECT_GT(s.tokens, 0);
  EXPECT_EQ(s.bpb, 0);
  // Every scored val target is a completion digit or the eos.
  data::PreparedData p = data::open_prepared(root.file("run/data"));
  data::SequentialLoader val(p.val, 2, 24, 2, 0, 1, DType::int64, kEos);
  data::Batch b;
  int64_t n = 0;
  while (val.next(b))
    for (int64_t v : test::ints(b.targets))
      if (v != -100) {
        EXPECT_TRUE((v >= '0' && v <= '9') || v == kEos) << v;
        ++n;
      }
  EXPECT_EQ(s.tokens, n);
}

}  // namespace
}  // namespace gdn
