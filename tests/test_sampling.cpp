// Sampling: greedy argmax (lowest id on ties), top_k = 1 equals greedy, empirical frequencies
// over many counters match softmax(logits / T), top-k and top-p restrict the support, the same
// (seed, counter) gives the same token, tensors of any float dtype and shape [1, 1, V] work.
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "src/ops/ops.h"
#include "src/train/sampling.h"
#include "tests/test_helpers.h"

namespace gdn::train {
namespace {

using test::error_of;

const std::vector<double> kLogits = {0.5, 2.0, -1.0, 1.5, 0.0, 2.0 - 1e-9};

std::vector<double> softmax(const std::vector<double>& z, double t) {
  double m = z[0];
  for (double v : z) m = std::max(m, v);
  std::vector<double> p;
  double s = 0;
  for (double v : z) s += std::exp((v - m) / t);
  for (double v : z) p.push_back(std::exp((v - m) / t) / s);
  return p;
}

std::vector<double> frequencies(const std::vector<double>& z, const SamplingOptions& o, int n,
                                uint64_t seed = 7) {
  std::vector<double> f(z.size(), 0.0);
  for (int c = 0; c < n; ++c) f[size_t(sample_token(z, o, seed, uint64_t(c)))] += 1.0 / n;
  return f;
}

TEST(Sampling, GreedyPicksArgmaxLowestIdOnTies) {
  SamplingOptions greedy;
  greedy.temperature = 0;
  for (uint64_t c = 0; c < 20; ++c) EXPECT_EQ(sample_token(kLogits, greedy, 1, c), 1);
  EXPECT_EQ(sample_token({3.0, 1.0, 3.0}, greedy, 1, 0), 0);
  EXPECT_EQ(sample_token({-INFINITY, 1.0, 1.0}, greedy, 1, 0), 1);
  const auto p = sampling_probs(kLogits, greedy);
  EXPECT_EQ(p, (std::vector<double>{0, 1, 0, 0, 0, 0}));
}

TEST(Sampling, TopKOneEqualsGreedy) {
  SamplingOptions greedy, top1;
  greedy.temperature = 0;
  top1.temperature = 1.3;
  top1.top_k = 1;
  const std::vector<double> tied = {1.0, 4.0, 4.0, 0.0};
  for (uint64_t c = 0; c < 50; ++c) {
    EXPECT_EQ(sample_token(kLogits, top1, 3, c), sample_token(kLogits, greedy, 3, c));
    EXPECT_EQ(sample_token(tied, top1, 3, c), 1);
  }
}

TEST(Sampling, FrequenciesMatchSoftmax) {
  const std::vector<double> z = {1.0, 0.2, -0.5, 0.7, 0.0};
  const int n = 200000;
  for (double t : {1.0, 0.5, 2.0}) {
    SamplingOptions o;
    o.temperature = t;
    const auto want = softmax(z, t);
    const auto got = frequencies(z, o, n);
    const auto probs = sampling_probs(z, o);
    for (size_t i = 0; i < z.size(); ++i) {
      // 5 standard deviations of a binomial frequency.
      const double tol = 5 * std::sqrt(want[i] * (1 - want[i]) / n);
      EXPECT_NEAR(got[i], want[i], tol) << "T " << t << " token " << i;
      EXPECT_NEAR(probs[i], want[i], 1e-12);
    }
  }
}

TEST(Sampling, TopKRestrictsTheSupport) {
  SamplingOptions o;
  o.top_k = 3;  // tokens 1, 5 (2 - 1e-9) and 3 (1.5)
  const int n = 60000;
  const auto got = frequencies(kLogits, o, n);
  const std::set<size_t> kept = {1, 3, 5};
  std::vector<double> sub = {kLogits[1], kLogits[3], kLogits[5]};
  const auto want = softmax(sub, 1.0);
  for (size_t i = 0; i < kLogits.size(); ++i)
    if (!kept.count(i)) {
      EXPECT_EQ(got[i], 0.0) << "token " << i << " is outside the top 3";
    }
  EXPECT_NEAR(got[1], want[0], 0.01);
  EXPECT_NEAR(got[3], want[1], 0.01);
  EXPECT_NEAR(got[5], want[2], 0.01);
  // Ties at the k-th place go to the lower id.
  o.top_k = 1;
  const auto p = sampling_probs({2.0, 5.0, 5.0}, o);
  EXPECT_EQ(p, (std::vector<double>{0, 1, 0}));
  // k beyond V keeps everything.
  o.top_k = 100;
  const auto all = sampling_probs(kLogits, o);
  const auto want_all = softmax(kLogits, 1.0);
  for (size_t i = 0; i < all.size(); ++i) EXPECT_NEAR(all[i], want_all[i], 1e-12);
}

TEST(Sampling, TopPRestrictsToTheNucleus) {
  // Probabilities 0.5, 0.25, 0.125, 0.125 (logits are their logs).
  const std::vector<double> z = {std::log(0.125), std::log(0.5), std::log(0.125), std::log(0.25)};
  SamplingOptions o;
  o.top_p = 0.7;  // 0.5 < 0.7 <= 0.75: the nucleus is {1, 3}
  auto p = sampling_probs(z, o);
  EXPECT_NEAR(p[1], 2.0 / 3, 1e-12);
  EXPECT_NEAR(p[3], 1.0 / 3, 1e-12);
  EXPECT_EQ(p[0], 0.0);
  EXPECT_EQ(p[2], 0.0);
  const auto got = frequencies(z, o, 30000);
  EXPECT_EQ(got[0] + got[2], 0.0);
  EXPECT_NEAR(got[1], 2.0 / 3, 0.015);
  o.top_p = 0.4;  // the top token alone
  for (uint64_t c = 0; c < 50; ++c) EXPECT_EQ(sample_token(z, o, 11, c), 1);
  o.top_p = 0.8;  // 0.75 < 0.8: three tokens; the tie at 0.125 keeps the lower id (0)
  p = sampling_probs(z, o);
  EXPECT_GT(p[0], 0.0);
  EXPECT_EQ(p[2], 0.0);
  // top_k then top_p: with k = 2 the nucleus is taken of {1, 3}'s mass.
  o.top_k = 2;
  o.top_p = 0.6;  // 0.5 / 0.75 = 0.67 >= 0.6: token 1 alone
  p = sampling_probs(z, o);
  EXPECT_EQ(p[1], 1.0);
}

TEST(Sampling, SameSeedAndCounterSameToken) {
  SamplingOptions o;
  o.temperature = 1.5;
  o.top_p = 0.95;
  std::set<int64_t> seen;
  for (uint64_t c = 0; c < 100; ++c) {
    const int64_t t = sample_token(kLogits, o, 42, c);
    EXPECT_EQ(t, sample_token(kLogits, o, 42, c));
    seen.insert(t);
  }
  EXPECT_GT(seen.size(), 2u) << "counters give different draws";
  int differ = 0;
  for (uint64_t c = 0; c < 100; ++c)
    differ += sample_token(kLogits, o, 42, c) != sample_token(kLogits, o, 43, c);
  EXPECT_GT(differ, 10) << "seeds give different streams";
}

TEST(Sampling, TensorInputAnyFloatDtypeAndShape) {
  SamplingOptions o;
  o.temperature = 0.8;
  o.top_k = 4;
  Tensor flat = ops::from_vector(kLogits, {6}, DType::float64);
  Tensor row = ops::from_vector(kLogits, {1, 1, 6}, DType::float32);
  for (uint64_t c = 0; c < 30; ++c) {
    const int64_t want = sample_token(kLogits, o, 5, c);
    EXPECT_EQ(sample_token(flat, o, 5, c), want);
    // float32 rounds 2 - 1e-9 to 2: a tie that keeps the same order (lower id first), and
    // weights that differ by 1e-9, so the draw lands on the same token.
    EXPECT_EQ(sample_token(row, o, 5, c), want);
  }
  SamplingOptions greedy;
  greedy.temperature = 0;
  EXPECT_EQ(sample_token(ops::cast(row, DType::bfloat16), greedy, 0, 0), 1);
  EXPECT_NE(error_of([&] {
              sample_token(ops::zeros({2, 6}), o, 0, 0);
            }).find("one row"),
            std::string::npos);
  EXPECT_NE(
      error_of([&] { sample_token(ops::zeros({6}, DType::int64), o, 0, 0); }).find("float tensor"),
      std::string::npos);
}

TEST(Sampling, ValidationAndBadLogits) {
  SamplingOptions o;
  o.temperature = -1;
  EXPECT_NE(error_of([&] { sample_token(kLogits, o, 0, 0); }).find("temperature"),
            std::string::npos);
  o = {};
  o.top_k = -2;
  EXPECT_NE(error_of([&] { sample_token(kLogits, o, 0, 0); }).find("top_k must be >= 0"),
            std::string::npos);
  o = {};
  o.top_p = 0;
  EXPECT_NE(error_of([&] { sample_token(kLogits, o, 0, 0); }).find("top_p must be in (0, 1]"),
            std::string::npos);
  o = {};
  EXPECT_NE(error_of([&] {
              sample_token({1.0, NAN}, o, 0, 0);
            }).find("logit 1 is NaN"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              sample_token({-INFINITY, -INFINITY}, o, 0, 0);
            }).find("every logit"),
            std::string::npos);
  // -inf tokens are never drawn, even with top_k larger than the finite set.
  o.top_k = 3;
  for (uint64_t c = 0; c < 100; ++c) EXPECT_NE(sample_token({0.0, -INFINITY, 0.0}, o, 1, c), 1);
}

}  // namespace
}  // namespace gdn::train
