// The model: parameter names and count, kernel choices agree, generation state matches the
// full forward, checkpoints round-trip bit-exactly and bad files give clear errors, configs
// give errors naming the key and line.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "layers/model.h"
#include "src/io/safetensors.h"
#include "src/ops/ops.h"
#include "src/train/model_io.h"
#include "src/train/run_config.h"
#include "tests/test_util.h"
#include "tests/tiny_runs.h"

namespace gdn {
namespace {

namespace fs = std::filesystem;

// Hidden 16, 2 layers of 2 heads of 8, vocab 32.
nn::ModelConfig small_config() {
  return test::model_config({16, 2, 2, 8, 32});
}

std::string tmp_dir(const std::string& name) {
  fs::path p = fs::temp_directory_path() / ("gdn_test_model_" + name);
  fs::remove_all(p);
  return p.string();
}

TEST(Model, ParameterNamesAreFlas) {
  Generator g(0);
  nn::CausalLM m(small_config(), test::init_context(g));
  std::vector<std::string> names;
  for (auto& [n, p] : m.named_parameters()) names.push_back(n);
  const std::vector<std::string> layer0 = {
      "model.layers.0.attn_norm.weight",     "model.layers.0.attn.q_proj.weight",
      "model.layers.0.attn.k_proj.weight",   "model.layers.0.attn.v_proj.weight",
      "model.layers.0.attn.a_proj.weight",   "model.layers.0.attn.b_proj.weight",
      "model.layers.0.attn.A_log",           "model.layers.0.attn.dt_bias",
      "model.layers.0.attn.q_conv1d.weight", "model.layers.0.attn.k_conv1d.weight",
      "model.layers.0.attn.v_conv1d.weight", "model.layers.0.attn.g_proj.weight",
      "model.layers.0.attn.o_norm.weight",   "model.layers.0.attn.o_proj.weight",
      "model.layers.0.mlp_norm.weight",      "model.layers.0.mlp.gate_proj.weight",
      "model.layers.0.mlp.up_proj.weight",   "model.layers.0.mlp.down_proj.weight"};
  EXPECT_EQ(names.front(), "model.embeddings.weight");
  for (const auto& n : layer0)
    EXPECT_NE(std::find(names.begin(), names.end(), n), names.end()) << n;
  EXPECT_EQ(names[names.size() - 2], "model.norm.weight");
  EXPECT_EQ(names.back(), "lm_head.weight");
  EXPECT_EQ(m.find_parameter("model.layers.1.attn.q_conv1d.weight")->shape(), (Shape{16, 1, 4}));
  // Init as fla: norms 1, A_log = log(U(0,16)) so exp(A_log) in (0, 16), dt = softplus(dt_bias)
  // in [1e-3, 0.1].
  test::expect_values(*m.find_parameter("model.norm.weight"), std::vector<double>(16, 1.0), 0);
  for (double a : m.find_parameter("model.layers.0.attn.A_log")->to_vector()) {
    EXPECT_LT(std::exp(a), 16.0);
    EXPECT_GT(std::exp(a), 0.0);
  }
  for (double b : m.find_parameter("model.layers.0.attn.dt_bias")->to_vector()) {
    double dt = std::log1p(std::exp(b));
    EXPECT_GE(dt, 1e-3 - 1e-9);
    EXPECT_LE(dt, 0.1 + 1e-9);
  }
}

TEST(Model, ParameterCountMatchesFormula) {
  // By hand for the small config: d=16, key_dim=16, value_dim=16, HV=2, W=4, MLP I=256.
  //   attn: q,k,v 3*256 + a,b 2*32 + A_log,dt_bias 4 + convs 4*48 + g 256 + o_norm 8 + o 256
  //   mlp 3*16*256, norms 2*16; embeddings and lm_head 32*16 each; final norm 16.
  const int64_t attn = 768 + 64 + 4 + 192 + 256 + 8 + 256, mlp = 3 * 16 * 256;
  const int64_t expected = 2 * (attn + mlp + 32) + 2 * 512 + 16;
  nn::ModelConfig c = small_config();
  EXPECT_EQ(c.num_parameters(), expected);
  Generator g(0);
  nn::InitContext ctx = test::init_context(g);
  EXPECT_EQ(nn::CausalLM(c, ctx).num_parameters(), expected);
  // fla's default GatedDeltaNetConfig (the ~1.3B model) and a ~340M one (hidden 1024, 21
  // layers, tied embeddings), built on meta.
  ctx.device = Device::meta();
  nn::ModelConfig big;  // hidden 2048, 21 layers, 6 heads x 256, expand_v 2, vocab 32000
  EXPECT_EQ(nn::CausalLM(big, ctx).num_parameters(), big.num_parameters());
  EXPECT_GT(big.num_parameters(), 1'300'000'000);
  EXPECT_LT(big.num_parameters(), 1'450'000'000);
  nn::ModelConfig mid;
  mid.hidden_size = 1024;
  mid.num_hidden_layers = 21;
  mid.num_heads = 4;
  mid.head_dim = 192;
  mid.tie_word_embeddings = true;
  EXPECT_EQ(nn::CausalLM(mid, ctx).num_parameters(), mid.num_parameters());
  EXPECT_GT(mid.num_parameters(), 330'000'000);
  EXPECT_LT(mid.num_parameters(), 360'000'000);
  EXPECT_EQ(mid.mlp_intermediate_size(), 2816);  // 256-rounded 2/3 * 4 * 1024
}

// Every kernel gives the same loss and gradients (fp64).
TEST(Model, KernelChoicesAgree) {
  std::vector<double> losses;
  std::vector<std::vector<double>> grads;
  for (gdr::Impl kernel : {gdr::Impl::recurrent, gdr::Impl::chunked, gdr::Impl::fused}) {
    nn::ModelConfig c = small_config();
    c.kernel = kernel;
    c.chunk_size = 16;
    Generator g(3);
    nn::InitContext ctx = test::init_context(g, DType::float64);
    nn::CausalLM m(c, ctx);
    m.compute_dtype = DType::float64;
    Generator d(9);
    Tensor ids = ops::randint({2, 37}, 0, 32, DType::int64, Device::cpu(), &d);
    Tensor tgt = ops::randint({2, 37}, 0, 32, DType::int64, Device::cpu(), &d);
    Tensor loss = m.loss(ids, tgt);
    loss.backward();
    losses.push_back(loss.item());
    std::vector<double> all;
    for (auto& [n, p] : m.named_parameters()) {
      auto v = p.grad().to_vector();
      all.insert(all.end(), v.begin(), v.end());
    }
    grads.push_back(all);
  }
  for (size_t i = 1; i < losses.size(); ++i) {
    EXPECT_NEAR(losses[i], losses[0], 1e-12 * std::abs(losses[0]));
    EXPECT_LT(test::rel_err(grads[i], grads[0]), 1e-10);
  }
}

// chunk_size 0 runs the device's chunk: on the CPU 16 for heads up to 64 wide, 32 up to 128, 64
// beyond; 64 on CUDA, for the recurrent kernels and for KDA; a chunk given is kept. A model
// left at 0 computes exactly what the same model at the resolved chunk computes.
TEST(Model, ChunkSizeZeroIsTheDevicesChoice) {
  nn::ModelConfig c = small_config();
  c.kernel = gdr::Impl::fused;
  EXPECT_EQ(c.chunk_size, 0);
  const Device cpu = Device::cpu(), cuda = Device::cuda(0);
  for (auto [dim, want] : {std::pair<int64_t, int64_t>{8, 16}, {64, 16}, {128, 32}, {256, 64}}) {
    c.head_dim = dim;
    EXPECT_EQ(c.kernel_chunk(cpu), want) << "head_dim " << dim;
    EXPECT_EQ(c.kernel_chunk(Device::meta()), want) << "head_dim " << dim;
    EXPECT_EQ(c.kernel_chunk(cuda), 64) << "head_dim " << dim;
  }
  c.head_dim = 64;
  c.expand_v = 2.0;  // V = 128: the wider of K and V decides
  EXPECT_EQ(c.kernel_chunk(cpu), 32);
  c.expand_v = 1.0;
  c.kernel = gdr::Impl::recurrent;
  EXPECT_EQ(c.kernel_chunk(cpu), 64);
  c.kernel = gdr::Impl::fused;
  c.chunk_size = 32;
  EXPECT_EQ(c.kernel_chunk(cpu), 32);
  EXPECT_EQ(nn::ModelConfig::kda_defaults().kernel_chunk(cpu), 64);

  std::vector<std::vector<double>> logits;  // fp32 logits over [2, 200] tokens
  for (int64_t chunk : {0, 16, 64}) {
    nn::ModelConfig m_cfg = small_config();
    m_cfg.kernel = gdr::Impl::fused;
    m_cfg.chunk_size = chunk;
    Generator g(3);
    nn::CausalLM m(m_cfg, test::init_context(g, DType::float32));
    Generator d(9);
    Tensor ids = ops::randint({2, 200}, 0, 32, DType::int64, Device::cpu(), &d);
    logits.push_back(m.logits(ids).to_vector());
  }
  EXPECT_EQ(logits[0], logits[1]);  // 0 ran 16: the same arithmetic, bit for bit
  EXPECT_NE(logits[0], logits[2]);  // 64 sums in another order
  EXPECT_LT(test::rel_err(logits[0], logits[2]), 1e-5);
}

// Feeding tokens one at a time through the recurrent state gives the full forward's logits.
TEST(Model, GenerationStateMatchesFullForward) {
  nn::ModelConfig c = small_config();
  Generator g(4);
  nn::InitContext ctx = test::init_context(g, DType::float64);
  nn::CausalLM m(c, ctx);
  m.compute_dtype = DType::float64;
  Tensor ids = ops::randint({1, 9}, 0, 32, DType::int64, Device::cpu(), &g);
  Tensor full;
  {
    autograd::NoGradGuard ng;
    full = m.logits(ids);
  }
  std::vector<nn::LayerState> states(size_t(c.num_hidden_layers));
  // A prompt of 4 at once, then single tokens.
  Tensor first = m.step(ops::contiguous(ops::slice(ids, 1, 0, 4)), states);
  EXPECT_LT(test::rel_err(first, ops::slice(full, 1, 3, 4)), 1e-12);
  for (int64_t t = 4; t < 9; ++t) {
    Tensor lg = m.step(ops::contiguous(ops::slice(ids, 1, t, t + 1)), states);
    EXPECT_LT(test::rel_err(lg, ops::slice(full, 1, t, t + 1)), 1e-12) << t;
  }
}

TEST(Checkpoint, RoundTripIsBitExact) {
  Generator g(5);
  nn::CausalLM a(small_config(), test::init_context(g));
  const std::string dir = tmp_dir("roundtrip");
  train::save_pretrained(dir, a);
  EXPECT_TRUE(fs::exists(fs::path(dir) / "config.json"));
  nn::ModelConfig c2 = train::load_config_json(dir);
  EXPECT_EQ(c2.num_parameters(), small_config().num_parameters());
  Generator g2(99);
  nn::CausalLM b(c2, test::init_context(g2));
  train::load_weights(dir, b);
  auto pa = a.named_parameters(), pb = b.named_parameters();
  ASSERT_EQ(pa.size(), pb.size());
  for (size_t i = 0; i < pa.size(); ++i) {
    EXPECT_EQ(pa[i].first, pb[i].first);
    EXPECT_EQ(pa[i].second.to_vector(), pb[i].second.to_vector()) << pa[i].first;
  }
  // Saving over an existing checkpoint replaces it whole.
  train::save_pretrained(dir, b, DType::bfloat16);
  auto t = io::load_safetensors((fs::path(dir) / "model.safetensors").string());
  EXPECT_EQ(t[0].second.dtype(), DType::bfloat16);
  for (const auto& e : fs::directory_iterator(fs::path(dir).parent_path()))  // no temporaries left
    EXPECT_EQ(e.path().filename().string().rfind(fs::path(dir).filename().string() + ".", 0),
              std::string::npos)
        << e.path();
}

TEST(Checkpoint, BadFilesGiveClearErrors) {
  Generator g(6);
  nn::InitContext ctx = test::init_context(g);
  nn::CausalLM m(small_config(), ctx);
  const std::string dir = tmp_dir("bad");
  train::save_pretrained(dir, m);
  const std::string st = (fs::path(dir) / "model.safetensors").string();
  auto expect_error = [&](const std::string& needle) {
    try {
      train::load_weights(dir, m);
      ADD_FAILURE() << "expected an error containing '" << needle << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  // A model with another shape: the wrong tensor and both shapes are named.
  nn::ModelConfig other = small_config();
  other.vocab_size = 40;
  nn::CausalLM m2(other, ctx);
  try {
    train::load_weights(dir, m2);
    ADD_FAILURE();
  } catch (const Error& e) {
    std::string s = e.what();
    EXPECT_NE(s.find(".weight' has shape"), std::string::npos) << s;
    EXPECT_NE(s.find("[32, 16]"), std::string::npos) << s;
    EXPECT_NE(s.find("[40, 16]"), std::string::npos) << s;
  }
  // A missing tensor.
  auto tensors = io::load_safetensors(st);
  tensors.erase(tensors.begin() + 3);
  io::save_safetensors(st, tensors);
  expect_error("missing tensor");
  // Truncated data.
  train::save_pretrained(dir, m);
  fs::resize_file(st, fs::file_size(st) - 100);
  expect_error("truncated");
  // A corrupt header.
  {
    std::fstream f(st, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(8);
    f.write("#####", 5);
  }
  expect_error("does not parse");
  // Not a safetensors file at all.
  {
    std::ofstream f(st, std::ios::binary);
    f << "hello";
  }
  expect_error("truncated");
}

TEST(Config, ErrorsNameKeyAndLine) {
  auto expect_error = [](const std::string& yaml, const std::string& needle,
                         std::vector<std::string> sets = {}) {
    try {
      train::parse_run_config(yaml, "cfg.yaml", sets);
      ADD_FAILURE() << "expected an error containing '" << needle << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_error("model:\n  hidden_size: 64\n  hiden_layers: 2\n",
               "cfg.yaml:3: unknown key 'model.hiden_layers'");
  expect_error("model:\n  num_hidden_layer: 2\n", "did you mean 'model.num_hidden_layers'");
  expect_error("model:\n  hidden_size: big\n", "cfg.yaml:2: model.hidden_size must be an integer");
  expect_error("train:\n  betas: 0.9\n", "train.betas must be a list");
  expect_error("model:\n  num_heads: 3\n  num_v_heads: 4\n", "multiple of num_heads");
  expect_error("trainer:\n  steps: 1\n", "unknown key 'trainer'");
  expect_error("model:\n  hidden_size: 64\n", "unknown key 'train.stepz'", {"train.stepz=3"});
  expect_error("model: {}\n", "(from --set): train.steps must be an integer", {"train.steps=many"});
  expect_error("model:\n  kernel: quick\n", "unknown kernel 'quick'");
  // Overrides and defaults.
  auto c =
      train::parse_run_config("model:\n  hidden_size: 64\n  num_v_heads: null\n", "c.yaml",
                              {"train.steps=7", "train.betas=[0.8, 0.9]", "model.use_gate=false"});
  EXPECT_EQ(c.model.hidden_size, 64);
  EXPECT_EQ(c.model.num_v_heads, 0);
  EXPECT_EQ(c.train.steps, 7);
  EXPECT_EQ(c.train.betas, (std::vector<double>{0.8, 0.9}));
  EXPECT_FALSE(c.model.use_gate);
  EXPECT_FALSE(c.train.allow_tf32);
  EXPECT_TRUE(train::parse_run_config("train:\n  allow_tf32: true\n", "t.yaml").train.allow_tf32);
  expect_error("train:\n  allow_tf32: maybe\n", "cfg.yaml:2: train.allow_tf32");
  // The resolved config parses back to the same values.
  auto again = train::parse_run_config(c.to_yaml(), "resolved.yaml");
  EXPECT_EQ(again.to_yaml(), c.to_yaml());
}

}  // namespace
}  // namespace gdn
