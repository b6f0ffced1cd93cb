// The softmax attention token mixer (layers/attention.h) and its ops (src/ops/attention.h,
// src/ops/rope.h): outputs against a naive fp64 reference written here (projections, rotate-half
// RoPE, full softmax with causal / window / sequence masks, o_proj), packed sequences against
// each sequence alone, fla's parameter names and shapes, the parameter formula, generation with
// a KV cache against the full forward, and a hybrid CausalLM (layer 1 attention). The fp64
// finite-difference checks are rows of the op table and the layer registry
// (tests/test_gradcheck_ops.cpp, tests/test_gradcheck_layers.cpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <vector>

#include "layers/attention.h"
#include "layers/gated_deltanet.h"
#include "layers/layer_gradchecks.h"
#include "layers/model.h"
#include "src/ops/attention.h"
#include "src/ops/ops.h"
#include "src/ops/rope.h"
#include "src/train/memory_profile.h"
#include "tests/test_helpers.h"
#include "tests/tiny_runs.h"

namespace gdn {
namespace {

using Vec = std::vector<double>;

double max_abs_diff(const Vec& a, const Vec& b) {
  EXPECT_EQ(a.size(), b.size());
  double m = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) m = std::max(m, std::abs(a[i] - b[i]));
  return m;
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
  EXPECT_EQ(a.shape(), b.shape());
  return max_abs_diff(a.to_vector(), b.to_vector());
}

// ---- the naive fp64 reference ----------------------------------------------------------------

// y [rows, out] = x [rows, in] W^T + b
Vec linear_ref(const Vec& x, int64_t rows, int64_t in, const Vec& w, const Vec& b, int64_t out) {
  Vec y(size_t(rows * out), 0.0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t o = 0; o < out; ++o) {
      double s = b.empty() ? 0.0 : b[size_t(o)];
      for (int64_t i = 0; i < in; ++i) s += x[size_t(r * in + i)] * w[size_t(o * in + i)];
      y[size_t(r * out + o)] = s;
    }
  return y;
}

// Rotate-half RoPE of one head row x [D] at position pos: pairs (i, i + D/2) turned by
// pos * theta^(-2i/D).
void rope_ref(double* x, int64_t D, double pos, double theta) {
  const int64_t half = D / 2;
  for (int64_t i = 0; i < half; ++i) {
    const double a = pos * std::pow(theta, -2.0 * double(i) / double(D));
    const double x1 = x[i], x2 = x[i + half];
    x[i] = x1 * std::cos(a) - x2 * std::sin(a);
    x[i + half] = x2 * std::cos(a) + x1 * std::sin(a);
  }
}

struct RefLayer {
  int64_t d = 0, H = 0, HKV = 0, D = 0, window = 0;
  double theta = 0;
  Vec wq, wk, wv, wo, bq, bk, bv;
};

RefLayer ref_of(const nn::Attention& m, const nn::AttentionConfig& a, int64_t d) {
  RefLayer r;
  r.d = d;
  r.H = a.num_heads;
  r.HKV = a.kv_heads();
  r.D = d / a.num_heads;
  r.window = a.window_size;
  r.theta = a.rope_theta;
  r.wq = m.q_proj->weight.to_vector();
  r.wk = m.k_proj->weight.to_vector();
  r.wv = m.v_proj->weight.to_vector();
  r.wo = m.o_proj->weight.to_vector();
  if (a.qkv_bias) {
    r.bq = m.q_proj->bias.to_vector();
    r.bk = m.k_proj->bias.to_vector();
    r.bv = m.v_proj->bias.to_vector();
  }
  return r;
}

// The layer on x [B, T, d] (cu: packed sequences of B = 1; empty: each row one sequence):
// every score materialised, masked to -inf, softmax by its definition.
Vec attention_layer_ref(const RefLayer& L, const Vec& x, int64_t B, int64_t T,
                        const std::vector<int64_t>& cu) {
  const int64_t rows = B * T, kv = L.HKV * L.D, G = L.H / L.HKV;
  Vec q = linear_ref(x, rows, L.d, L.wq, L.bq, L.d);
  Vec k = linear_ref(x, rows, L.d, L.wk, L.bk, kv);
  Vec v = linear_ref(x, rows, L.d, L.wv, L.bv, kv);
  std::vector<int64_t> start(static_cast<size_t>(T), 0);  // first token of each token's sequence
  for (size_t n = 0; n + 1 < cu.size(); ++n)
    for (int64_t t = cu[n]; t < cu[n + 1]; ++t) start[size_t(t)] = cu[n];
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t t = r % T;
    const double pos = double(t - start[size_t(t)]);
    for (int64_t h = 0; h < L.H; ++h) rope_ref(&q[size_t((r * L.H + h) * L.D)], L.D, pos, L.theta);
    for (int64_t h = 0; h < L.HKV; ++h)
      rope_ref(&k[size_t((r * L.HKV + h) * L.D)], L.D, pos, L.theta);
  }
  Vec o(size_t(rows * L.d), 0.0);
  const double scale = 1.0 / std::sqrt(double(L.D));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < L.H; ++h)
      for (int64_t t = 0; t < T; ++t) {
        Vec s(static_cast<size_t>(T));
        double mx = -INFINITY;
        for (int64_t j = 0; j < T; ++j) {
          const bool seen =
              j <= t && start[size_t(j)] == start[size_t(t)] && (L.window == 0 || j > t - L.window);
          double dot = 0;
          for (int64_t e = 0; e < L.D; ++e)
            dot += q[size_t(((b * T + t) * L.H + h) * L.D + e)] *
                   k[size_t(((b * T + j) * L.HKV + h / G) * L.D + e)];
          s[size_t(j)] = seen ? scale * dot : -INFINITY;
          mx = std::max(mx, s[size_t(j)]);
        }
        double z = 0;
        for (double& e : s) z += (e = std::exp(e - mx));
        for (int64_t j = 0; j < T; ++j)
          for (int64_t e = 0; e < L.D; ++e)
            o[size_t(((b * T + t) * L.H + h) * L.D + e)] +=
                s[size_t(j)] / z * v[size_t(((b * T + j) * L.HKV + h / G) * L.D + e)];
      }
  return linear_ref(o, rows, L.d, L.wo, {}, L.d);
}

// ---- building layers -------------------------------------------------------------------------

using nn::fp64_ctx;  // fp64 parameters, std 0.3 (layers/layer_gradchecks.h)

// The gradient checks' attention entry (rope_theta 100) on layer 0.
nn::AttentionConfig attn_config(int64_t heads, int64_t kv_heads, int64_t window, bool bias) {
  nn::AttentionConfig a = nn::gradcheck_attention_config(heads, kv_heads, window, bias);
  a.layers = {0};
  return a;
}

nn::ModelConfig model_with(const nn::AttentionConfig& a, int64_t hidden) {
  nn::ModelConfig c;
  c.hidden_size = hidden;
  c.num_hidden_layers = 1;
  c.num_heads = 2;
  c.head_dim = 4;
  c.vocab_size = 11;
  c.attn = {a};
  return c;
}

// An fp64 layer with random weights and (with qkv_bias) random biases.
std::unique_ptr<nn::Attention> make_layer(const nn::AttentionConfig& a, int64_t hidden,
                                          Generator& g) {
  auto m = std::make_unique<nn::Attention>(model_with(a, hidden), a, fp64_ctx(&g));
  for (auto& [n, p] : m->named_parameters())
    if (n.find("bias") != std::string::npos) ops::normal_(p, 0.0, 0.3, &g);
  return m;
}

Tensor randn64(const Shape& s, Generator& g) {
  return ops::randn(s, DType::float64, Device::cpu(), &g);
}

struct Variant {
  const char* what;
  int64_t heads, kv_heads, window;
  bool bias;
};
const Variant kVariants[] = {{"full causal", 2, 0, 0, false},
                             {"GQA 4/2, qkv_bias", 4, 2, 0, true},
                             {"window 3", 2, 0, 3, false},
                             {"window 1, MQA, bias", 4, 1, 1, true},
                             {"window 4, GQA", 4, 2, 4, false}};

// fn(config, layer, x) for each variant: a layer of width d and input x of `shape`, both drawn
// from Generator(seed).
template <class Fn>
void for_each_variant(uint64_t seed, int64_t d, const Shape& shape, const Fn& fn) {
  for (const Variant& v : kVariants) {
    SCOPED_TRACE(v.what);
    Generator g(seed);
    const nn::AttentionConfig a = attn_config(v.heads, v.kv_heads, v.window, v.bias);
    auto layer = make_layer(a, d, g);
    fn(a, *layer, randn64(shape, g));
  }
}

// ---- the layer ---------------------------------------------------------------------------------

TEST(AttentionLayer, MatchesTheNaiveReference) {
  const int64_t d = 16, B = 2, T = 9;
  for_each_variant(
      11, d, {B, T, d}, [&](const nn::AttentionConfig& a, nn::Attention& layer, const Tensor& x) {
        const Vec want = attention_layer_ref(ref_of(layer, a, d), x.to_vector(), B, T, {});
        EXPECT_LT(max_abs_diff(layer.forward(x).to_vector(), want), 1e-10);
      });
}

TEST(AttentionLayer, PackedSequencesMatchTheReferenceAndEachSequenceAlone) {
  const int64_t d = 16, T = 13;
  const std::vector<int64_t> cu = {0, 4, 5, 13};
  for_each_variant(
      12, d, {1, T, d}, [&](const nn::AttentionConfig& a, nn::Attention& layer, const Tensor& x) {
        const Tensor packed = layer.forward(x, cu);
        EXPECT_LT(max_abs_diff(packed.to_vector(),
                               attention_layer_ref(ref_of(layer, a, d), x.to_vector(), 1, T, cu)),
                  1e-10);
        for (size_t n = 0; n + 1 < cu.size(); ++n) {
          const Tensor alone = layer.forward(ops::contiguous(ops::slice(x, 1, cu[n], cu[n + 1])));
          EXPECT_LT(max_abs_diff(ops::contiguous(ops::slice(packed, 1, cu[n], cu[n + 1])), alone),
                    1e-12)
              << "sequence " << n;
        }
      });
}

TEST(AttentionLayer, ParametersAreFlasByNameAndShape) {
  const int64_t d = 16;
  for (bool bias : {false, true}) {
    Generator g(1);
    const nn::AttentionConfig a = attn_config(4, 2, 0, bias);  // head_dim 4, kv dim 8
    auto layer = make_layer(a, d, g);
    std::map<std::string, Shape> got, want = {{"q_proj.weight", {16, 16}},
                                              {"k_proj.weight", {8, 16}},
                                              {"v_proj.weight", {8, 16}},
                                              {"o_proj.weight", {16, 16}}};
    if (bias) {
      want["q_proj.bias"] = {16};
      want["k_proj.bias"] = {8};
      want["v_proj.bias"] = {8};
    }
    for (const auto& [n, p] : layer->named_parameters()) got[n] = p.shape();
    EXPECT_EQ(got, want);
    nn::ModelConfig c = model_with(a, d);
    EXPECT_EQ(layer->num_parameters(), nn::attention_num_parameters(c, 0));
    EXPECT_EQ(nn::find_token_mixer("attention").num_parameters(c, 0), layer->num_parameters());
  }
}

TEST(AttentionLayer, TrainFlopsFollowTheFormula) {
  nn::AttentionConfig a = attn_config(4, 2, 0, false);
  const double linear = 16.0 * 16 * 2 + 2.0 * 8 * 16;  // q, o and k, v weights
  // H * 4 D per visible pair * (1 + 2.5), pairs per query T / 2 (full causal).
  const auto flops = [&](int64_t window, int64_t T) {
    a.window_size = window;
    return nn::attention_train_flops_per_token(model_with(a, 16), 0, T) - 6 * linear;
  };
  EXPECT_DOUBLE_EQ(flops(0, 100), 4 * (4.0 * 4 * 50) * 3.5);
  EXPECT_DOUBLE_EQ(flops(100, 100), flops(0, 100));  // a window of T is full causal
  EXPECT_DOUBLE_EQ(flops(200, 100), flops(0, 100));
  // Window 10 over 100 tokens: sum_t min(t + 1, 10) = 55 + 90 * 10 = 955 pairs, 9.55 per query,
  // and the formula's w - w^2 / 2T = 9.5 (the continuous count).
  EXPECT_DOUBLE_EQ(flops(10, 100), 4 * (4.0 * 4 * 9.5) * 3.5);
}

// forward_with_state over chunks of `sizes` tokens (summing to T) equals the full forward.
void expect_generation_matches(const nn::Attention& layer, const Tensor& x,
                               const std::vector<int64_t>& sizes) {
  const Tensor full = layer.forward(x);
  nn::LayerState state;
  int64_t t = 0;
  for (int64_t n : sizes) {
    const Tensor y = layer.forward_with_state(ops::contiguous(ops::slice(x, 1, t, t + n)), state);
    EXPECT_LT(max_abs_diff(y, ops::contiguous(ops::slice(full, 1, t, t + n))), 1e-12)
        << "tokens " << t << " to " << t + n;
    t += n;
  }
  ASSERT_EQ(t, x.size(1));
  auto* s = dynamic_cast<nn::AttentionState*>(state.get());
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->position, x.size(1));
}

TEST(AttentionLayer, GenerationWithAKvCacheMatchesTheFullForward) {
  const int64_t d = 16, T = 11;
  for_each_variant(
      13, d, {2, T, d}, [&](const nn::AttentionConfig&, nn::Attention& layer, const Tensor& x) {
        expect_generation_matches(layer, x, std::vector<int64_t>(T, 1));  // one token at a time
        expect_generation_matches(layer, x, {3, 1, 4, 2, 1});             // chunks
        expect_generation_matches(layer, x, {5, 6});                      // a prompt, then more
      });
}

TEST(AttentionLayer, TheKvCacheKeepsOnlyWhatTheWindowSees) {
  Generator g(14);
  const nn::AttentionConfig a = attn_config(2, 0, 3, false);
  auto layer = make_layer(a, 16, g);
  nn::LayerState state;
  layer->forward_with_state(randn64({1, 5, 16}, g), state);
  auto* s = dynamic_cast<nn::AttentionState*>(state.get());
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->k.shape(), Shape({1, 2, 2, 8}));  // window - 1 = 2 tokens
  EXPECT_EQ(s->v.shape(), Shape({1, 2, 2, 8}));
  layer->forward_with_state(randn64({1, 1, 16}, g), state);
  EXPECT_EQ(s->k.size(1), 2);
  EXPECT_EQ(s->position, 6);
}

TEST(AttentionLayer, ForeignStatesAndBadConfigsAreRefused) {
  struct Foreign : nn::MixerState {};
  Generator g(1);
  auto layer = make_layer(attn_config(2, 0, 0, false), 16, g);
  nn::LayerState wrong = std::make_unique<Foreign>();
  std::string e = test::error_of([&] { layer->forward_with_state(randn64({1, 1, 16}, g), wrong); });
  EXPECT_NE(e.find("belongs to another mixer"), std::string::npos) << e;
  e = test::error_of([&] {
    const nn::AttentionConfig a = attn_config(3, 0, 0, false);
    nn::Attention m(model_with(a, 16), a, fp64_ctx(&g));
  });
  EXPECT_NE(e.find("hidden_size 16 must be a multiple of attn.num_heads 3"), std::string::npos)
      << e;
  e = test::error_of([&] {
    const nn::AttentionConfig a = attn_config(16, 0, 0, false);  // head_dim 1
    nn::Attention m(model_with(a, 16), a, fp64_ctx(&g));
  });
  EXPECT_NE(e.find("must be even"), std::string::npos) << e;
  e = test::error_of([&] { layer->forward(randn64({1, 3, 12}, g)); });
  EXPECT_NE(e.find("input [1, 3, 12] must be [B, T, 16]"), std::string::npos) << e;
}

// ---- the ops -----------------------------------------------------------------------------------

TEST(AttentionOps, RopeRotatesHalvesFromEachSequenceStart) {
  Generator g(3);
  const Tensor x = randn64({1, 7, 2, 6}, g);
  const std::vector<int64_t> cu = {0, 3, 7};
  ops::RopeOptions opt{500.0, 0, cu};
  Vec want = x.to_vector();
  for (int64_t t = 0; t < 7; ++t)
    for (int64_t h = 0; h < 2; ++h)
      rope_ref(&want[size_t((t * 2 + h) * 6)], 6, double(t < 3 ? t : t - 3), 500.0);
  EXPECT_LT(max_abs_diff(ops::rope(x, opt).to_vector(), want), 1e-13);
  // With an offset: positions offset + t.
  ops::RopeOptions shifted{500.0, 4, {}};
  want = x.to_vector();
  for (int64_t t = 0; t < 7; ++t)
    for (int64_t h = 0; h < 2; ++h)
      rope_ref(&want[size_t((t * 2 + h) * 6)], 6, double(4 + t), 500.0);
  EXPECT_LT(max_abs_diff(ops::rope(x, shifted).to_vector(), want), 1e-13);
  // fp32 and bf16 compute in fp32 and round once.
  const Tensor exact = ops::rope(x, opt);
  EXPECT_LT(
      max_abs_diff(ops::cast(ops::rope(ops::cast(x, DType::float32), opt), DType::float64), exact),
      1e-5);
  EXPECT_LT(
      max_abs_diff(ops::cast(ops::rope(ops::cast(x, DType::bfloat16), opt), DType::float64), exact),
      5e-2);
}

TEST(AttentionOps, Fp32AndBf16FollowFp64) {
  Generator g(4);
  const Tensor q = randn64({2, 70, 4, 8}, g), k = randn64({2, 70, 2, 8}, g);
  const Tensor v = randn64({2, 70, 2, 8}, g);
  ops::AttentionOptions opt;
  opt.window = 20;
  const Tensor want = ops::attention(q, k, v, opt);
  for (auto [dt, tol] : {std::pair{DType::float32, 1e-5}, std::pair{DType::bfloat16, 6e-2}}) {
    const Tensor got = ops::attention(ops::cast(q, dt), ops::cast(k, dt), ops::cast(v, dt), opt);
    EXPECT_EQ(got.dtype(), dt);
    EXPECT_LT(max_abs_diff(ops::cast(got, DType::float64), want), tol) << dtype_name(dt);
  }
}

TEST(AttentionOps, MetaTensorsGiveShapesAndBadShapesAreNamed) {
  const Tensor q = ops::empty({2, 5, 4, 8}, DType::bfloat16, Device::meta());
  const Tensor kv = ops::empty({2, 5, 2, 8}, DType::bfloat16, Device::meta());
  const Tensor o = ops::attention(q, kv, kv);
  EXPECT_EQ(o.shape(), Shape({2, 5, 4, 8}));
  EXPECT_TRUE(o.device().is_meta());
  EXPECT_EQ(ops::rope(q).shape(), q.shape());
  const Tensor k3 = ops::empty({2, 5, 3, 8}, DType::bfloat16, Device::meta());
  std::string e = test::error_of([&] { ops::attention(q, k3, k3); });
  EXPECT_NE(e.find("q [2, 5, 4, 8], k [2, 5, 3, 8]"), std::string::npos) << e;
  const Tensor k6 = ops::empty({2, 6, 2, 8}, DType::bfloat16, Device::meta());
  e = test::error_of([&] { ops::attention(q, k6, k6); });
  EXPECT_NE(e.find("q [2, 5, 4, 8], k [2, 6, 2, 8]"), std::string::npos) << e;
  e = test::error_of([&] { ops::rope(ops::empty({1, 2, 3, 5}, DType::float32, Device::meta())); });
  EXPECT_NE(e.find("must be even"), std::string::npos) << e;
}

TEST(AttentionOps, TheAttentionOpIsAMixerKernel) {
  EXPECT_TRUE(nn::is_mixer_kernel_op("attention"));
  EXPECT_FALSE(nn::is_mixer_kernel_op("rope"));
}

// ---- a hybrid model ----------------------------------------------------------------------------

nn::ModelConfig hybrid_config() {
  nn::AttentionConfig a;
  a.layers = {1};
  a.num_heads = 2;
  a.num_kv_heads = 1;
  a.window_size = 4;
  nn::ModelConfig c = model_with(a, 16);  // 2 heads
  c.num_hidden_layers = 3;
  c.head_dim = 8;
  c.vocab_size = 23;
  c.intermediate_size = 24;
  return c;
}

TEST(HybridModel, LayerOneIsAttentionAndTheRestGatedDeltaNet) {
  const nn::ModelConfig c = hybrid_config();
  Generator g(5);
  nn::InitContext ctx = fp64_ctx(&g);
  ctx.std = 0.1;
  nn::CausalLM m(c, ctx);
  m.compute_dtype = DType::float64;
  ASSERT_EQ(m.model->layers.size(), 3u);
  EXPECT_NE(dynamic_cast<nn::GatedDeltaNet*>(m.model->layers[0]->attn.get()), nullptr);
  EXPECT_NE(dynamic_cast<nn::Attention*>(m.model->layers[1]->attn.get()), nullptr);
  EXPECT_NE(dynamic_cast<nn::GatedDeltaNet*>(m.model->layers[2]->attn.get()), nullptr);
  EXPECT_EQ(m.num_parameters(), c.num_parameters());
  bool named = false;
  for (const auto& [n, p] : m.named_parameters()) named |= n == "model.layers.1.attn.k_proj.weight";
  EXPECT_TRUE(named);

  // Forward and backward: every parameter gets a finite gradient.
  const Tensor ids = ops::randint({2, 9}, 0, c.vocab_size, DType::int64, Device::cpu(), &g);
  const Tensor tgt = ops::randint({2, 9}, 0, c.vocab_size, DType::int64, Device::cpu(), &g);
  m.loss(ids, tgt).backward();
  for (const auto& [n, p] : m.named_parameters()) {
    ASSERT_TRUE(p.grad().defined()) << n;
    for (double e : p.grad().to_vector()) ASSERT_TRUE(std::isfinite(e)) << n;
  }

  // Generation token by token ends where the full forward does, for both rows of the batch.
  std::vector<nn::LayerState> states(3);
  Tensor last;
  for (int64_t t = 0; t < 9; ++t)
    last = m.step(ops::contiguous(ops::slice(ids, 1, t, t + 1)), states);
  const Tensor full = m.logits(ids);
  EXPECT_LT(
      max_abs_diff(ops::reshape(last, {2, c.vocab_size}),
                   ops::reshape(ops::contiguous(ops::slice(full, 1, 8, 9)), {2, c.vocab_size})),
      1e-10);
}

// A hybrid run config: hidden 64, 3 layers (layer 1 attention: 4 heads, 2 kv heads, window 48).
train::RunConfig hybrid_run(const std::string& checkpointing, int64_t layers = 3,
                            int64_t attention_layer = 1) {
  train::RunConfig c = train::parse_run_config(
      test::model_yaml({64, layers, 2, 32, 512}) +
          "train:\n  batch_size: 2\n  checkpointing: " + checkpointing + "\n",
      "hybrid.yaml");
  nn::AttentionConfig a;
  a.layers = {attention_layer};
  a.num_heads = 4;
  a.num_kv_heads = 2;
  a.window_size = 48;
  c.model.attn = {a};
  return c;
}

TEST(HybridModel, MetaPredictsTheCpuMemoryOfATrainingStep) {
  for (const char* ckpt : {"none", "block", "kernel"}) {
    SCOPED_TRACE(ckpt);
    const train::RunConfig c = hybrid_run(ckpt);
    const auto meta = train::profile_training_step(c, "meta", 2, 96);
    const auto cpu = train::profile_training_step(c, "cpu", 2, 96);
    EXPECT_GT(cpu.peak_bytes, 0);
    EXPECT_LE(std::abs(double(meta.peak_bytes - cpu.peak_bytes)), 0.02 * double(cpu.peak_bytes));
    EXPECT_EQ(meta.saved_total, cpu.saved_total);
  }
}

TEST(HybridModel, TheAttentionOpsSavedTensorsAreKernelResiduals) {
  // One layer, attention: the only kernel residuals are the attention op's q, k, v, lse and o
  // (o is also o_proj's input: its storage may be counted there, once).
  const auto p = train::profile_training_step(hybrid_run("none", 1, 0), "meta", 2, 96);
  ASSERT_EQ(p.saved_by_kind.count("kernel_residuals"), 1u);
  const int64_t tokens = 2 * 96, fp32 = 4;
  const int64_t q = tokens * 64, k_and_v = 2 * tokens * 2 * 16, o = tokens * 64, lse = tokens * 4;
  EXPECT_GE(p.saved_by_kind.at("kernel_residuals"), (q + k_and_v + lse) * fp32);
  EXPECT_LE(p.saved_by_kind.at("kernel_residuals"), (q + k_and_v + o + lse) * fp32);
}

}  // namespace
}  // namespace gdn
