// Generation with reset_on_eos (`gdn generate --reset-on-eos`): after an end-of-document token
// the tokens are those of a fresh state (every layer's delta-rule state and conv cache) fed the
// eos, with the same sampling draws; without it generation stops at the eos.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "layers/model.h"
#include "src/ops/ops.h"
#include "src/train/sampling.h"
#include "tests/tiny_runs.h"

namespace gdn {
namespace {

constexpr int64_t kEos = 257;  // the byte tokenizer with specials: bos 256, eos 257

std::unique_ptr<nn::CausalLM> tiny_model() {
  nn::ModelConfig c = test::model_config({16, 2, 2, 8, 258});
  c.kernel = gdr::Impl::recurrent;
  c.initializer_range = 0.5;  // large weights: the next token depends on the state
  Generator g(5);
  return std::make_unique<nn::CausalLM>(c, test::init_context(g));
}

struct Generated {
  std::vector<int64_t> ids;  // every sampled token, eos included (GenerateStats::ids)
  train::GenerateStats stats;
};

Generated generate(const nn::CausalLM& m, const train::GenerateOptions& o) {
  auto tok = data::make_byte_tokenizer(true);
  Generated g;
  g.stats = train::generate_text(m, *tok, "ab", o, [](std::string_view) {});
  g.ids.assign(g.stats.ids.begin(), g.stats.ids.end());
  return g;
}

Tensor ids_tensor(const std::vector<int64_t>& v) {
  return ops::from_vector(std::vector<double>(v.begin(), v.end()), {1, int64_t(v.size())},
                          DType::int64);
}

// 400 tokens from seed 2 (the tiny model samples an eos in them), restarting at each eos.
train::GenerateOptions resetting_options() {
  train::GenerateOptions o;
  o.max_tokens = 400;
  o.seed = 2;
  o.reset_on_eos = true;
  return o;
}

TEST(PackedGenerate, AfterAnEosTheStateIsFresh) {
  auto m = tiny_model();
  train::GenerateOptions o = resetting_options();
  const Generated a = generate(*m, o);
  ASSERT_GE(a.stats.resets.size(), 1u) << "no eos sampled: pick another seed";
  EXPECT_EQ(a.stats.generated, o.max_tokens);
  ASSERT_EQ(int64_t(a.ids.size()), o.max_tokens);
  for (int64_t r : a.stats.resets) EXPECT_EQ(a.ids[size_t(r)], kEos);
  // The second document (after the first eos, up to the next or the end) from a fresh state fed
  // the eos, drawing with the same counters.
  const int64_t first = a.stats.resets[0];
  const int64_t second = a.stats.resets.size() > 1 ? a.stats.resets[1] : o.max_tokens - 1;
  ASSERT_GE(second - first, 50) << "a longer second document makes a stronger check";
  std::vector<nn::LayerState> states(m->model->layers.size());
  Tensor logits = m->step(ids_tensor({kEos}), states);
  for (int64_t i = first + 1; i <= second; ++i) {
    const int64_t t = train::sample_token(logits, o.sampling, o.seed, uint64_t(i));
    ASSERT_EQ(t, a.ids[size_t(i)]) << "token " << i;
    logits = m->step(ids_tensor({t}), states);
  }
  // Without the reset, generation stops at the first eos.
  o.reset_on_eos = false;
  const Generated b = generate(*m, o);
  EXPECT_EQ(b.stats.generated, first);
  EXPECT_TRUE(b.stats.resets.empty());
  EXPECT_EQ(b.ids, std::vector<int64_t>(a.ids.begin(), a.ids.begin() + first + 1));  // the eos too
}

// The state carried over the eos would give another second document: the check above can fail.
TEST(PackedGenerate, TheCarriedStateWouldDiffer) {
  auto m = tiny_model();
  train::GenerateOptions o = resetting_options();
  const Generated a = generate(*m, o);
  ASSERT_GE(a.stats.resets.size(), 1u);
  const int64_t first = a.stats.resets[0];
  std::vector<nn::LayerState> states(m->model->layers.size());
  std::vector<int64_t> prompt = {'a', 'b'};
  Tensor logits = m->step(ids_tensor(prompt), states);
  for (int64_t i = 0; i < first; ++i) logits = m->step(ids_tensor({a.ids[size_t(i)]}), states);
  logits = m->step(ids_tensor({kEos}), states);  // eos into the carried state
  std::vector<int64_t> carried;
  for (int64_t i = first + 1; i < first + 9 && i < int64_t(a.ids.size()); ++i) {
    const int64_t t = train::sample_token(logits, o.sampling, o.seed, uint64_t(i));
    carried.push_back(t);
    logits = m->step(ids_tensor({t}), states);
  }
  EXPECT_NE(carried, std::vector<int64_t>(a.ids.begin() + first + 1,
                                          a.ids.begin() + first + 1 + int64_t(carried.size())));
}

}  // namespace
}  // namespace gdn
