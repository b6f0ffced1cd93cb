// Document packing (data.pack: documents, src/data/packing.h): rows hold whole documents and
// split only the ones longer than a row (into pieces overlapping by one token); the boundaries of
// a batch come from the end-of-document tokens and cover every row; each document's last target
// and the padding are masked; the order is deterministic, visits every row once per epoch, gives
// W ranks the rows of one process and resumes from the step; validation takes the rows in order;
// a packed training run resumes bit for bit; a corpus without an eos trains as stream.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>

#include "src/data/loader.h"
#include "src/data/packing.h"
#include "src/train/memory_profile.h"
#include "src/train/trainer.h"
#include "tests/test_helpers.h"
#include "tests/tiny_runs.h"

namespace gdn {
namespace {

namespace fs = std::filesystem;
constexpr int32_t kEos = 9;
constexpr int64_t kSeq = 8;  // rows of 9 tokens

// Documents of these lengths (eos included), tokens 0..8 cycling inside each, in one shard.
std::string write_docs(const test::TempDir& dir, const std::vector<int64_t>& lens) {
  std::vector<int32_t> tokens;
  for (size_t d = 0; d < lens.size(); ++d) {
    for (int64_t i = 0; i + 1 < lens[d]; ++i) tokens.push_back(int32_t((d + size_t(i)) % 9));
    tokens.push_back(kEos);
  }
  const std::string path = dir.file("train.bin");
  data::write_shard(path, tokens, 10);
  return path;
}

const std::vector<int64_t> kLens = {3, 20, 5, 1, 9, 2, 4, 7, 6, 12};

TEST(Packing, RowsHoldWholeDocumentsAndSplitOnlyLongOnes) {
  test::TempDir dir("gdn_packing_layout");
  auto shard = data::Shard::open(write_docs(dir, kLens));
  const data::PackedRows p = data::pack_documents(*shard, kEos, kSeq);
  EXPECT_EQ(p.num_documents, 10);
  // Pieces: whole documents of 2..9 tokens; 20 -> 9 + 9 + 4 and 12 -> 9 + 4 (overlapping by one
  // token); the document of 1 token (a lone eos) is dropped.
  std::multiset<int64_t> lens(p.piece_len.begin(), p.piece_len.end());
  EXPECT_EQ(lens, (std::multiset<int64_t>{3, 9, 9, 4, 5, 9, 2, 4, 7, 6, 9, 4}));
  int64_t doc_start = 3;  // the document of 20 tokens
  std::vector<int64_t> starts;
  for (size_t i = 0; i < p.piece_start.size(); ++i)
    if (p.piece_start[i] >= doc_start && p.piece_start[i] < doc_start + 20)
      starts.push_back(p.piece_start[i]);
  std::sort(starts.begin(), starts.end());
  EXPECT_EQ(starts, (std::vector<int64_t>{3, 11, 19}));
  // Rows follow the shard: validation's first rows are its first documents.
  for (int64_t r = 1; r < p.num_rows(); ++r) {
    EXPECT_LT(p.piece_start[size_t(p.row_begin[size_t(r - 1)])],
              p.piece_start[size_t(p.row_begin[size_t(r)])]);
  }
  // Every row fits.
  for (int64_t r = 0; r < p.num_rows(); ++r) {
    int64_t used = 0;
    for (int64_t i = p.row_begin[size_t(r)]; i < p.row_begin[size_t(r) + 1]; ++i)
      used += p.piece_len[size_t(i)];
    EXPECT_LE(used, kSeq + 1) << "row " << r;
  }
  // 4 full pieces, and the rest (35 tokens) best fit in 4 rows of 9: {7, 2}, {6, 3}, {5, 4},
  // {4, 4}.
  EXPECT_EQ(p.num_rows(), 8);
  EXPECT_EQ(p.used_tokens(), 36 + 35);
}

// Batch tokens, targets and boundaries, checked against the shard: every boundary starts a
// Batches of 4 rows of kSeq tokens, documents ending at kEos.
data::LoaderOptions packing_options() {
  data::LoaderOptions o;
  o.batch_size = 4;
  o.seq_len = kSeq;
  o.pack_eos = kEos;
  return o;
}

// piece (right after an eos, or at a row's start or its padding), no target crosses one.
TEST(Packing, BoundariesAndMaskedTargets) {
  test::TempDir dir("gdn_packing_batch");
  auto shard = data::Shard::open(write_docs(dir, kLens));
  data::LoaderOptions o = packing_options();
  o.prefetch = false;
  data::DataLoader loader(shard, o);
  for (int64_t step = 0; step < 3; ++step) {
    const data::Batch b = loader.batch_at(step);
    const auto in = test::ints(b.inputs), tgt = test::ints(b.targets), tok = test::ints(b.tokens);
    const std::vector<int64_t>& cu = b.cu_seqlens;
    ASSERT_GE(cu.size(), 5u);
    EXPECT_EQ(cu.front(), 0);
    EXPECT_EQ(cu.back(), 4 * kSeq);
    for (size_t i = 1; i < cu.size(); ++i) EXPECT_LT(cu[i - 1], cu[i]);
    std::set<int64_t> bounds(cu.begin(), cu.end());
    for (int64_t r = 0; r <= 4; ++r) EXPECT_TRUE(bounds.count(r * kSeq)) << "row " << r;
    // Each position's sequence start; a sequence whose first input is an eos is padding (a
    // piece has 2 or more tokens and only its last is an eos).
    std::vector<int64_t> seg(size_t(4 * kSeq));
    for (size_t n = 0; n + 1 < cu.size(); ++n)
      for (int64_t i = cu[n]; i < cu[n + 1]; ++i) seg[size_t(i)] = cu[n];
    for (int64_t c : cu)
      if (c % kSeq != 0) {
        EXPECT_EQ(in[size_t(c - 1)], kEos) << "a boundary after a non-eos";
      }
    for (int64_t r = 0; r < 4; ++r)
      for (int64_t t = 0; t < kSeq; ++t) {
        const int64_t i = r * kSeq + t;
        const std::string at = "step " + std::to_string(step) + " position " + std::to_string(i);
        EXPECT_EQ(in[size_t(i)], tok[size_t(r * (kSeq + 1) + t)]);
        const bool last = t + 1 == kSeq;
        if (in[size_t(seg[size_t(i)])] == kEos) {
          EXPECT_EQ(tgt[size_t(i)], -100) << "padding is never scored: " << at;
        } else if (in[size_t(i)] == kEos) {
          // A document's last position: its target (the next document's first) is masked, and
          // a boundary follows.
          EXPECT_EQ(tgt[size_t(i)], -100) << at;
          if (!last) {
            EXPECT_TRUE(bounds.count(i + 1)) << at;
          }
        } else {
          EXPECT_EQ(tgt[size_t(i)], tok[size_t(r * (kSeq + 1) + t + 1)]) << at;
          if (!last) {
            EXPECT_FALSE(bounds.count(i + 1)) << "a target across a boundary: " << at;
          }
        }
      }
  }
}

// Step s, global row g reads row permuted_row(s * GB + g): every epoch visits each row once.
TEST(Packing, EveryRowOncePerEpochInASeededOrder) {
  for (int64_t n : {1, 2, 7, 64, 1000}) {
    for (uint64_t seed : {0u, 5u}) {
      std::vector<int64_t> epoch0, epoch1;
      for (int64_t i = 0; i < n; ++i) epoch0.push_back(data::permuted_row(i, n, seed));
      for (int64_t i = n; i < 2 * n; ++i) epoch1.push_back(data::permuted_row(i, n, seed));
      std::vector<int64_t> sorted0 = epoch0, sorted1 = epoch1;
      std::sort(sorted0.begin(), sorted0.end());
      std::sort(sorted1.begin(), sorted1.end());
      std::vector<int64_t> all(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) all[size_t(i)] = i;
      EXPECT_EQ(sorted0, all);
      EXPECT_EQ(sorted1, all);
      if (n >= 64) {
        EXPECT_NE(epoch0, epoch1) << "each epoch has its own order";
        EXPECT_NE(epoch0, all) << "the order is shuffled";
      }
    }
  }
  EXPECT_NE(data::permuted_row(3, 1000, 0), data::permuted_row(3, 1000, 1));
}

TEST(Packing, DeterministicAcrossPrefetchRanksAndResume) {
  test::TempDir dir("gdn_packing_determinism");
  auto shard = data::Shard::open(write_docs(dir, kLens));
  data::LoaderOptions o = packing_options();
  o.seed = 11;
  o.prefetch = false;
  data::DataLoader plain(shard, o);
  o.prefetch = true;
  data::DataLoader fetched(shard, o);
  std::vector<data::Batch> seen;
  for (int s = 0; s < 6; ++s) {
    data::Batch a = plain.next(), b = fetched.next();
    EXPECT_EQ(test::ints(a.tokens), test::ints(b.tokens)) << "step " << s;
    EXPECT_EQ(a.cu_seqlens, b.cu_seqlens);
    seen.push_back(a);
  }
  // Resume at step 3.
  fetched.set_state({3});
  EXPECT_EQ(test::ints(fetched.next().tokens), test::ints(seen[3].tokens));
  // Two ranks of batch 2 read the rows of one process of batch 4.
  for (int rank = 0; rank < 2; ++rank) {
    data::LoaderOptions r = o;
    r.batch_size = 2;
    r.rank = rank;
    r.world_size = 2;
    data::DataLoader part(shard, r);
    const auto mine = test::ints(part.batch_at(4).tokens), all = test::ints(seen[4].tokens);
    EXPECT_EQ(mine, std::vector<int64_t>(all.begin() + rank * 2 * (kSeq + 1),
                                         all.begin() + (rank + 1) * 2 * (kSeq + 1)));
  }
  // Another seed, another order.
  o.seed = 12;
  data::DataLoader other(shard, o);
  bool differs = false;
  for (int s = 0; s < 6; ++s)
    differs |= test::ints(other.next().tokens) != test::ints(seen[size_t(s)].tokens);
  EXPECT_TRUE(differs);
}

TEST(Packing, ValidationTakesTheRowsInOrder) {
  test::TempDir dir("gdn_packing_val");
  auto shard = data::Shard::open(write_docs(dir, kLens));
  const data::PackedRows p = data::pack_documents(*shard, kEos, kSeq);
  data::SequentialLoader val(shard, 4, kSeq, 0, 0, 1, DType::int64, kEos);
  EXPECT_EQ(val.num_windows(), p.num_rows());
  EXPECT_EQ(val.num_batches(), 2);  // 8 rows
  data::Batch b;
  int64_t row = 0;
  while (val.next(b)) {
    EXPECT_EQ(b.cu_seqlens.back(), b.batch_size() * kSeq);
    for (int64_t r = 0; r < b.batch_size(); ++r, ++row)
      EXPECT_EQ(b.starts[size_t(r)], p.piece_start[size_t(p.row_begin[size_t(row)])]);
  }
  EXPECT_EQ(row, 8);
}

// The tiny text run with the byte tokenizer's eos (vocab 258), so data.pack: documents packs.
train::RunConfig packed_run(const std::string& root, const std::string& run) {
  return test::tiny_text_run(root, run, {"model.vocab_size=258", "data.pack=documents"});
}

TEST(Packing, TrainingResumesBitForBit) {
  const std::string root = test::fresh_dir("gdn_test_packing_resume");
  test::write_tiny_corpus(fs::path(root) / "corpus");
  train::TrainerOptions quiet;
  quiet.quiet = true;
  train::RunConfig a = packed_run(root, "a");
  a.train.steps = 6;
  {
    train::Trainer t(a, quiet);
    EXPECT_NE(t.data().describe().find("packed documents"), std::string::npos)
        << t.data().describe();
    EXPECT_EQ(t.run().step, 6);
  }
  train::RunConfig b = packed_run(root, "b");
  b.train.steps = 6;
  b.data.dir = (fs::path(root) / "a" / "data").string();
  {
    train::TrainerOptions o = quiet;
    o.stop_after = 2;
    train::Trainer t(b, o);
    EXPECT_EQ(t.run().step, 2);
  }
  {
    train::TrainerOptions o = quiet;
    o.resume = (fs::path(root) / "b").string();
    train::Trainer t(b, o);
    EXPECT_EQ(t.run().step, 6);
  }
  const auto la = test::loss_curve((fs::path(root) / "a").string());
  EXPECT_EQ(la.size(), 6u + 2u);
  EXPECT_EQ(la, test::loss_curve((fs::path(root) / "b").string()));  // bit for bit
  // Packing changes what is trained: the stream run of the same data has another curve.
  train::RunConfig s = packed_run(root, "s");
  s.train.steps = 6;
  s.data.dir = b.data.dir;
  s.data.pack = train::Pack::stream;
  {
    train::Trainer t(s, quiet);
    t.run();
  }
  EXPECT_NE(la, test::loss_curve((fs::path(root) / "s").string()));
}

TEST(Packing, ACorpusWithoutEosTrainsAsStream) {
  const std::string root = test::fresh_dir("gdn_test_packing_no_eos");
  test::write_tiny_corpus(fs::path(root) / "corpus");
  train::TrainerOptions o;
  o.quiet = true;
  train::RunConfig c = test::tiny_text_run(root, "run", {"data.pack=documents"});
  c.train.steps = 1;
  train::Trainer t(c, o);
  EXPECT_NE(t.data().describe().find("stream windows (data.pack: documents needs"),
            std::string::npos)
      << t.data().describe();
}

// The memory profile runs the trainer's packed path (one row of B * T with boundaries) on meta
// as on the cpu; its kernels keep one chunk state more per row than the stream path's.
TEST(Packing, MemoryProfileTakesThePackedPath) {
  std::map<train::Pack, int64_t> residuals;
  for (train::Pack pack : {train::Pack::documents, train::Pack::stream}) {
    train::RunConfig c = train::parse_run_config(
        test::model_yaml({32, 2, 2, 16, 64, 16}) + "train:\n  batch_size: 2\n", "small.yaml");
    c.data.pack = pack;
    const auto meta = train::profile_training_step(c, "meta", 2, 40);
    const auto cpu = train::profile_training_step(c, "cpu", 2, 40);
    EXPECT_EQ(meta.packing, enum_name(pack));
    EXPECT_EQ(meta.saved_total, cpu.saved_total);
    EXPECT_NEAR(double(meta.peak_bytes), double(cpu.peak_bytes), 0.02 * double(cpu.peak_bytes));
    residuals[pack] = meta.saved_by_kind.at("kernel_residuals");
  }
  EXPECT_GT(residuals[train::Pack::documents], residuals[train::Pack::stream]);
  // The profile's boundaries: one inside each row.
  EXPECT_EQ(train::packed_profile_cu_seqlens(2, 40), (std::vector<int64_t>{0, 21, 40, 61, 80}));
}

}  // namespace
}  // namespace gdn
