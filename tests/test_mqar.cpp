// MQAR: the row layout (key/value ranges, queried keys were shown with the same values), targets
// only at query-key positions, determinism by (seed, step), distinct ranks, loader state
// restore, mqar_accuracy on hand-built logits, and validation messages.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "src/data/mqar.h"
#include "src/ops/ops.h"
#include "tests/test_helpers.h"

namespace gdn::data {
namespace {

using test::error_of;
using test::ints;

// Vocab 64 (n_keys = 31: keys [1, 32), values [32, 64)), rows of 40 tokens with 8 pairs and 6
// queries, 5 rows a batch, seed 1234.
MqarOptions small_options() {
  return MqarOptions{/*vocab_size=*/64, /*seq_len=*/40,   /*num_pairs=*/8,
                     /*num_queries=*/6, /*batch_size=*/5, /*seed=*/1234};
}

TEST(Mqar, LayoutKeysValuesQueriesAndPadding) {
  for (int64_t queries : {6, 8, 11}) {  // fewer, as many and more queries than pairs
    MqarOptions o = small_options();
    o.num_queries = queries;
    const int64_t P = o.num_pairs, Q = o.num_queries, T = o.seq_len, B = o.batch_size;
    const int64_t n_keys = mqar_num_keys(o.vocab_size);
    ASSERT_EQ(n_keys, 31);
    Batch b = mqar_batch(o, 3);
    ASSERT_EQ(b.inputs.shape(), (Shape{B, T}));
    ASSERT_EQ(b.targets.shape(), (Shape{B, T}));
    ASSERT_EQ(b.tokens.shape(), (Shape{B, T + 1}));
    EXPECT_EQ(b.inputs.dtype(), DType::int64);
    EXPECT_EQ(b.targets.dtype(), DType::int64);
    EXPECT_EQ(b.batch_size(), B);
    EXPECT_EQ(b.step, 3);
    const auto in = ints(b.inputs), tok = ints(b.tokens);
    for (int64_t r = 0; r < B; ++r) {
      const int64_t* row = in.data() + r * T;
      std::map<int64_t, int64_t> pairs;
      std::set<int64_t> values;
      for (int64_t i = 0; i < P; ++i) {
        const int64_t k = row[2 * i], v = row[2 * i + 1];
        EXPECT_GE(k, 1);
        EXPECT_LT(k, 1 + n_keys);
        EXPECT_GE(v, 1 + n_keys);
        EXPECT_LT(v, o.vocab_size);
        EXPECT_TRUE(pairs.emplace(k, v).second) << "key " << k << " shown twice";
        values.insert(v);
      }
      EXPECT_EQ(int64_t(values.size()), P) << "values are distinct";
      std::map<int64_t, int64_t> times_queried;
      for (int64_t q = 0; q < Q; ++q) {
        const int64_t pos = 2 * P + 2 * q;
        const int64_t k = row[pos], v = row[pos + 1];
        ASSERT_TRUE(pairs.count(k)) << "query " << k << " was never shown";
        EXPECT_EQ(v, pairs[k]) << "query value differs from its pair";
        ++times_queried[k];
      }
      for (auto& [k, n] : times_queried) EXPECT_LE(n, (Q + P - 1) / P) << "key " << k;
      for (int64_t t = 2 * (P + Q); t < T; ++t) EXPECT_EQ(row[t], 0) << "padding at " << t;
      // tokens = inputs then one padding token.
      for (int64_t t = 0; t < T; ++t) EXPECT_EQ(tok[size_t(r * (T + 1) + t)], row[t]);
      EXPECT_EQ(tok[size_t(r * (T + 1) + T)], 0);
      EXPECT_EQ(b.starts[size_t(r)], 3 * B + r);
    }
  }
}

TEST(Mqar, TargetsOnlyAtQueryKeys) {
  MqarOptions o = small_options();
  const int64_t P = o.num_pairs, Q = o.num_queries, T = o.seq_len;
  Batch b = mqar_batch(o, 0);
  const auto in = ints(b.inputs), tgt = ints(b.targets);
  for (int64_t r = 0; r < o.batch_size; ++r) {
    for (int64_t t = 0; t < T; ++t) {
      const bool query_key = t >= 2 * P && t < 2 * (P + Q) && (t - 2 * P) % 2 == 0;
      const int64_t want = query_key ? in[size_t(r * T + t + 1)] : kMqarIgnore;
      EXPECT_EQ(tgt[size_t(r * T + t)], want) << "row " << r << " position " << t;
    }
  }
}

TEST(Mqar, DeterministicBySeedAndStep) {
  MqarOptions o = small_options();
  EXPECT_EQ(ints(mqar_batch(o, 7).inputs), ints(mqar_batch(o, 7).inputs));
  EXPECT_EQ(ints(mqar_batch(o, 7).targets), ints(mqar_batch(o, 7).targets));
  EXPECT_NE(ints(mqar_batch(o, 7).inputs), ints(mqar_batch(o, 8).inputs));
  MqarOptions other = o;
  other.seed = o.seed + 1;
  EXPECT_NE(ints(mqar_batch(o, 7).inputs), ints(mqar_batch(other, 7).inputs));
  // Rows within a batch differ too (each has its own stream).
  const auto in = ints(mqar_batch(o, 7).inputs);
  std::vector<int64_t> row0(in.begin(), in.begin() + o.seq_len);
  std::vector<int64_t> row1(in.begin() + o.seq_len, in.begin() + 2 * o.seq_len);
  EXPECT_NE(row0, row1);
}

TEST(Mqar, RanksDrawDifferentBatches) {
  MqarOptions o = small_options();
  // Ranks now name their world size (rank r of W reads rows of the global batch of W * B).
  EXPECT_NE(ints(mqar_batch(o, 2, 0, 2).inputs), ints(mqar_batch(o, 2, 1, 2).inputs));
  EXPECT_EQ(ints(mqar_batch(o, 2, 1, 2).inputs), ints(mqar_batch(o, 2, 1, 2).inputs));
}

TEST(Mqar, LoaderStateRestore) {
  MqarOptions o = small_options();
  MqarLoader a(o, 1, 2);
  std::vector<std::vector<int64_t>> seen;
  for (int i = 0; i < 5; ++i) seen.push_back(ints(a.next().inputs));
  EXPECT_EQ(a.state().step, 5);
  EXPECT_EQ(seen[2], ints(mqar_batch(o, 2, 1, 2).inputs));

  MqarLoader b(o, 1, 2);
  b.set_state({2});
  EXPECT_EQ(b.state().step, 2);
  for (int i = 2; i < 5; ++i) {
    Batch batch = b.next();
    EXPECT_EQ(batch.step, i);
    EXPECT_EQ(ints(batch.inputs), seen[size_t(i)]);
  }
  EXPECT_EQ(ints(b.batch_at(0).inputs), seen[0]);
  EXPECT_EQ(b.state().step, 5) << "batch_at leaves the state alone";
  EXPECT_NE(error_of([&] { b.set_state({-1}); }).find("cannot restore step -1"), std::string::npos);
}

TEST(Mqar, AccuracyOnHandBuiltLogits) {
  // B = 1, T = 4, V = 3; positions 1 and 3 are ignored.
  const std::vector<double> z = {
      0.1, 2.0, 0.3,  // argmax 1
      5.0, 0.0, 0.0,  // ignored
      1.0, 1.0, 0.0,  // tie between 0 and 1: argmax 0 (lowest id)
      0.0, 0.0, 9.0,  // ignored
  };
  Tensor logits = ops::from_vector(z, {1, 4, 3});
  Tensor targets = ops::from_vector({1, -100, 1, -100}, {1, 4}, DType::int64);
  EXPECT_DOUBLE_EQ(mqar_accuracy(logits, targets), 0.5);
  targets = ops::from_vector({1, -100, 0, -100}, {1, 4}, DType::int64);
  EXPECT_DOUBLE_EQ(mqar_accuracy(logits, targets), 1.0);
  EXPECT_DOUBLE_EQ(mqar_accuracy(ops::cast(logits, DType::bfloat16), targets), 1.0);
  targets = ops::from_vector({2, -100, 2, -100}, {1, 4}, DType::int64);
  EXPECT_DOUBLE_EQ(mqar_accuracy(logits, targets), 0.0);
  targets = ops::from_vector({-100, -100, -100, -100}, {1, 4}, DType::int64);
  EXPECT_DOUBLE_EQ(mqar_accuracy(logits, targets), 0.0) << "nothing scored";
  EXPECT_NE(error_of([&] {
              mqar_accuracy(logits, ops::from_vector({1, 1, 1}, {1, 3}, DType::int64));
            }).find("leading shape"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              mqar_accuracy(logits, ops::from_vector({7, 1, 1, 1}, {1, 4}, DType::int64));
            }).find("target 7"),
            std::string::npos);
}

TEST(Mqar, AccuracyOfTheOracleIsOne) {
  // Logits that put all mass on the target reach 1; uniform logits reach 0 (argmax = id 0).
  MqarOptions o = small_options();
  Batch b = mqar_batch(o, 0);
  const int64_t N = o.batch_size * o.seq_len, V = o.vocab_size;
  const auto tgt = ints(b.targets);
  std::vector<double> z(size_t(N * V), 0.0);
  for (int64_t i = 0; i < N; ++i)
    if (tgt[size_t(i)] != kMqarIgnore) z[size_t(i * V + tgt[size_t(i)])] = 1.0;
  Tensor logits = ops::from_vector(z, {o.batch_size, o.seq_len, V});
  EXPECT_DOUBLE_EQ(mqar_accuracy(logits, b.targets), 1.0);
  EXPECT_DOUBLE_EQ(mqar_accuracy(ops::zeros_like(logits), b.targets), 0.0);
}

TEST(Mqar, ValidationNamesTheValues) {
  MqarOptions o = small_options();
  o.vocab_size = 4;
  EXPECT_NE(error_of([&] { validate(o); }).find("vocab_size must be >= 5"), std::string::npos);
  o = small_options();
  o.seq_len = 27;
  const std::string short_seq = error_of([&] { mqar_batch(o, 0); });
  EXPECT_NE(short_seq.find("seq_len 27"), std::string::npos) << short_seq;
  EXPECT_NE(short_seq.find(">= 2 * (num_pairs + num_queries) = 28"), std::string::npos);
  o.seq_len = 28;
  EXPECT_EQ(error_of([&] { mqar_batch(o, 0); }), "");
  o = small_options();
  o.num_pairs = 32;
  o.seq_len = 100;
  const std::string too_many = error_of([&] { validate(o); });
  EXPECT_NE(too_many.find("num_pairs must be in [1, 31]"), std::string::npos) << too_many;
  EXPECT_NE(too_many.find("got 32"), std::string::npos);
  o = small_options();
  o.num_queries = 0;
  EXPECT_NE(error_of([&] { validate(o); }).find("num_queries must be >= 1, got 0"),
            std::string::npos);
  o = small_options();
  o.batch_size = 0;
  EXPECT_NE(error_of([&] { MqarLoader l(o); }).find("batch_size must be >= 1, got 0"),
            std::string::npos);
  EXPECT_NE(error_of([&] { mqar_batch(small_options(), -1); }).find("step must be >= 0"),
            std::string::npos);
  // The smallest vocabulary works: 2 keys, 2 values.
  o = small_options();
  o.vocab_size = 5;
  o.num_pairs = 2;
  o.num_queries = 3;
  o.seq_len = 10;
  const auto in = ints(mqar_batch(o, 0).inputs);
  for (int64_t r = 0; r < o.batch_size; ++r) {
    const std::set<int64_t> keys = {in[size_t(r * 10)], in[size_t(r * 10 + 2)]};
    EXPECT_EQ(keys, (std::set<int64_t>{1, 2}));
  }
}

}  // namespace
}  // namespace gdn::data
