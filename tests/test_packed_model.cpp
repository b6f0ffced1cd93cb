// The whole model over packed sequences (CausalLM with cu_seqlens), fp64: the logits equal each
// document run alone, and the loss over all T targets has every parameter gradient equal to the
// per-document losses weighted by their share of the targets and summed (1e-10), for the
// chunked and recurrent kernels and under activation checkpointing (whose recompute must see
// the same boundaries).
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "layers/model.h"
#include "src/ops/ops.h"
#include "tests/test_util.h"
#include "tests/tiny_runs.h"

namespace gdn {
namespace {

// Lengths 1, 3, 11, 2, 13: the conv width is 4, the chunk 16.
const std::vector<int64_t> kCu = {0, 1, 4, 15, 17, 30};

std::unique_ptr<nn::CausalLM> small_model(gdr::Impl kernel) {
  nn::ModelConfig c = test::model_config({16, 2, 2, 8, 32, 16});
  c.kernel = kernel;
  Generator g(7);
  auto m = std::make_unique<nn::CausalLM>(c, test::init_context(g, DType::float64));
  m->compute_dtype = DType::float64;
  return m;
}

Tensor tokens(int64_t n, uint64_t seed) {
  Generator g(seed);
  return ops::randint({1, n}, 0, 32, DType::int64, Device::cpu(), &g);
}

std::map<std::string, std::vector<double>> grads_of(const nn::CausalLM& m) {
  std::map<std::string, std::vector<double>> g;
  for (auto& [name, p] : m.named_parameters()) g[name] = p.grad().to_vector();
  return g;
}

void zero_grads(nn::CausalLM& m) {
  for (Tensor& p : m.parameters()) p.set_grad(Tensor());
}

void expect_packed_equals_alone(nn::CausalLM& m) {
  const int64_t T = kCu.back();
  const Tensor ids = tokens(T, 1), tgt = tokens(T, 2);
  // Logits.
  const Tensor packed = m.logits(ids, kCu).detach();
  std::vector<Tensor> parts;
  for (size_t n = 0; n + 1 < kCu.size(); ++n)
    parts.push_back(m.logits(ops::slice(ids, 1, kCu[n], kCu[n + 1])).detach());
  EXPECT_LT(test::rel_err(packed, ops::concat(parts, 1)), 1e-10);
  // Without cu_seqlens the later documents see the earlier ones: the comparison can fail.
  EXPECT_GT(test::rel_err(m.logits(ids).detach(), ops::concat(parts, 1)), 1e-6);

  // Gradients: the mean over all T targets = sum over documents of (len / T) x their mean.
  zero_grads(m);
  m.loss(ids, tgt, kCu).backward();
  const auto packed_grads = grads_of(m);
  zero_grads(m);
  for (size_t n = 0; n + 1 < kCu.size(); ++n) {
    const Tensor l =
        m.loss(ops::slice(ids, 1, kCu[n], kCu[n + 1]), ops::slice(tgt, 1, kCu[n], kCu[n + 1]));
    ops::mul(l, double(kCu[n + 1] - kCu[n]) / double(T)).backward();
  }
  const auto alone_grads = grads_of(m);
  ASSERT_EQ(packed_grads.size(), alone_grads.size());
  for (const auto& [name, g] : packed_grads)
    EXPECT_LT(test::rel_err(g, alone_grads.at(name)), 1e-10) << name;
}

TEST(PackedModel, ChunkedEqualsEachDocumentAlone) {
  expect_packed_equals_alone(*small_model(gdr::Impl::chunked));
}

TEST(PackedModel, RecurrentEqualsEachDocumentAlone) {
  expect_packed_equals_alone(*small_model(gdr::Impl::recurrent));
}

// The recompute of a checkpointed block runs in backward, after the forward returned: it must
// still see the boundaries.
TEST(PackedModel, CheckpointedBlocksKeepTheBoundaries) {
  for (nn::Checkpointing c : {nn::Checkpointing::block, nn::Checkpointing::kernel}) {
    auto m = small_model(gdr::Impl::chunked);
    m->checkpointing = c;
    expect_packed_equals_alone(*m);
  }
}

TEST(PackedModel, MalformedCuSeqlensAreRefused) {
  auto m = small_model(gdr::Impl::chunked);
  const Tensor ids = tokens(8, 1);
  EXPECT_THROW(m->logits(ids, {0, 5, 3, 8}), std::exception);
  EXPECT_THROW(m->logits(ids, {0, 7}), std::exception);
}

}  // namespace
}  // namespace gdn
