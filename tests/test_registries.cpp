// The registries and typed options of the design (docs/design.md): the gated-delta-rule and
// attention implementation tables, the token mixer table, enum names and their binding in configs.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>

#include "kernels/attention_registry.h"
#include "kernels/gdr_registry.h"
#include "layers/gated_deltanet.h"
#include "layers/model.h"
#include "layers/token_mixer.h"
#include "src/core/error.h"
#include "src/train/run_config.h"

namespace gdn {
namespace {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

TEST(GdrRegistry, OneEntryPerImplementation) {
  std::vector<std::string> names;
  for (const gdr::Implementation& i : gdr::implementations()) names.push_back(i.name);
  EXPECT_EQ(names,
            (std::vector<std::string>{"recurrent", "chunked", "chunked_fat", "fused", "ssd"}));
  for (const gdr::Implementation& i : gdr::implementations()) {
    EXPECT_EQ(&gdr::find_implementation(i.name), &i);
    EXPECT_EQ(&gdr::implementation_of(i.configure(gdr::Problem{})), &i) << i.name;
    EXPECT_TRUE(i.cpu.of<float>().forward && i.cpu.of<double>().backward &&
                i.cpu.of<bf16>().forward);
#if defined(GDN_WITH_CUDA)
    EXPECT_NE(i.cuda, nullptr) << i.name;
#else
    EXPECT_EQ(i.cuda, nullptr) << i.name;
#endif
  }
  EXPECT_EQ(gdr::find_implementation("chunked_full").name, std::string("chunked_fat"));
  EXPECT_FALSE(gdr::find_implementation("ssd").delta_rule);
  EXPECT_EQ(gdr::implementation_names(true), "recurrent, chunked, chunked_fat, fused");
}

TEST(GdrRegistry, UnknownNameListsTheKnown) {
  const std::string e = error_of([] { gdr::find_implementation("fast"); });
  EXPECT_NE(e.find("unknown implementation 'fast'"), std::string::npos) << e;
  EXPECT_NE(e.find("recurrent, chunked, chunked_fat, fused, ssd"), std::string::npos) << e;
}

TEST(GdrRegistry, ResidualSizeFollowsThePolicy) {
  gdr::Problem p;
  p.B = 2, p.T = 100, p.H = 1, p.HV = 2, p.K = 32, p.V = 48, p.chunk = 64, p.scale = 0.1;
  const int64_t states = 2 * 2 * 2 * 32 * 48;
  const int64_t full = 2 * 2 * 2 * 64 * (64 + 32 + 48);  // A and [W | U] per chunk
  EXPECT_EQ(gdr::find_implementation("chunked").residual_elems(p), states);
  EXPECT_EQ(gdr::find_implementation("chunked_fat").residual_elems(p), states + full);
  // The policy belongs to chunked: another family with residual=full is its own entry.
  p.impl = gdr::Impl::fused;
  p.residual = gdr::Residual::full;
  EXPECT_EQ(gdr::implementation_of(p).name, std::string("fused"));
  EXPECT_EQ(gdr::residual_elems(p), states);
}

TEST(AttentionRegistry, OneEntryPerImplementation) {
  std::vector<std::string> names;
  for (const attn::Implementation& i : attn::implementations()) names.push_back(i.name);
  EXPECT_EQ(names, (std::vector<std::string>{"attention", "attention_flash", "attention_cudnn"}));
  EXPECT_EQ(std::set<std::string>(names.begin(), names.end()).size(), names.size());
  for (const attn::Implementation& i : attn::implementations()) {
    EXPECT_EQ(&attn::find_implementation(i.name), &i);
    EXPECT_EQ(&attn::implementation_of(i.impl), &i) << i.name;
    EXPECT_TRUE(attn::is_implementation(i.name));
    EXPECT_TRUE(i.on_cuda) << i.name;
    EXPECT_NE(std::string(i.summary), "") << i.name;
  }
  EXPECT_EQ(attn::implementation_names(), "attention, attention_flash, attention_cudnn");
  EXPECT_EQ(attn::implementation_names(true), "attention");
  EXPECT_EQ(attn::cuda_only_names(), "attention_flash, attention_cudnn");
  EXPECT_EQ(attn::find_implementation("attention").impl, attn::Impl::automatic);
  EXPECT_FALSE(attn::is_implementation("flash"));
  // An unknown name is named, with the known ones.
  const std::string e = error_of([] { attn::find_implementation("attention_fa3"); });
  EXPECT_NE(e.find("unknown implementation 'attention_fa3' (known: attention, attention_flash, "
                   "attention_cudnn)"),
            std::string::npos)
      << e;
}

// `attention` runs the CPU kernel for every input type; the CUDA-only entries have no CPU kernel,
// their CUDA kernels only in a CUDA build, and cuDNN's for bf16 alone.
TEST(AttentionRegistry, KernelsPerDevice) {
  const attn::Implementation& pick = attn::find_implementation("attention");
  ASSERT_TRUE(pick.on_cpu && pick.cpu);
  EXPECT_TRUE(pick.cpu->of<float>().forward && pick.cpu->of<float>().backward);
  EXPECT_TRUE(pick.cpu->of<double>().forward && pick.cpu->of<bf16>().backward);
  EXPECT_EQ(pick.cuda, nullptr);  // resolved per pass (attn::cuda_pass)
  for (const char* name : {"attention_flash", "attention_cudnn"}) {
    const attn::Implementation& i = attn::find_implementation(name);
    EXPECT_FALSE(i.on_cpu) << name;
    EXPECT_EQ(i.cpu, nullptr) << name;
#if defined(GDN_WITH_CUDA)
    ASSERT_NE(i.cuda, nullptr) << name;
    EXPECT_TRUE(i.cuda->of<bf16>().forward && i.cuda->of<bf16>().backward) << name;
    EXPECT_EQ(i.cuda->of<float>().forward != nullptr, i.impl == attn::Impl::flash) << name;
#else
    EXPECT_EQ(i.cuda, nullptr) << name;
#endif
  }
#if !defined(GDN_WITH_CUDA)
  EXPECT_THROW(
      attn::cuda_pass(attn::Problem{}, attn::Impl::automatic, attn::SdpaType::bf16, false, nullptr),
      std::invalid_argument);
#endif
}

// The residual is lse [B, H, T]; the CPU workspace is the CPU kernel's, in accumulator bytes.
TEST(AttentionRegistry, ResidualAndWorkspaceSizes) {
  attn::Problem p;
  p.B = 2, p.T = 40, p.H = 4, p.HKV = 2, p.D = 16, p.scale = 0.25;
  const attn::Implementation& pick = attn::find_implementation("attention");
  for (const attn::Implementation& i : attn::implementations())
    EXPECT_EQ(i.residual_elems(p), 2 * 4 * 40) << i.name;
  for (bool backward : {false, true}) {
    const int64_t elems =
        backward ? attn::backward_workspace_elems(p) : attn::forward_workspace_elems(p);
    EXPECT_EQ(pick.cpu->workspace_bytes(p, attn::SdpaType::f32, backward, nullptr, nullptr),
              4 * elems);
    EXPECT_EQ(pick.cpu->workspace_bytes(p, attn::SdpaType::bf16, backward, nullptr, nullptr),
              4 * elems);
    EXPECT_EQ(pick.cpu->workspace_bytes(p, attn::SdpaType::f64, backward, nullptr, nullptr),
              8 * elems);
  }
}

// Visible (query, key) pairs of one sequence of L tokens, counted one query at a time.
double pairs_by_count(int64_t L, int64_t window) {
  double n = 0;
  for (int64_t t = 0; t < L; ++t) n += double(window > 0 ? std::min(t + 1, window) : t + 1);
  return n;
}

// The FLOPs `gdn bench` reports for attention rows: per query head, 4 D per visible pair forward
// and 10 D more backward (14 D for forward and backward), full causal, windowed and packed.
TEST(AttentionRegistry, FlopsPerVisiblePair) {
  attn::Problem p;
  p.B = 2, p.T = 200, p.H = 3, p.HKV = 3, p.D = 16, p.scale = 0.25;
  for (const attn::Implementation& i : attn::implementations()) {
    for (int64_t window : {int64_t(0), int64_t(32), int64_t(200), int64_t(500)}) {
      p.window = window;
      const double pairs = 2 * pairs_by_count(200, window);
      EXPECT_DOUBLE_EQ(attn::visible_pairs(p), pairs) << window;
      EXPECT_DOUBLE_EQ(i.flops(p, false), 3 * pairs * 4 * 16) << i.name << " w=" << window;
      EXPECT_DOUBLE_EQ(i.flops(p, true), 3 * pairs * 14 * 16) << i.name << " w=" << window;
    }
  }
  // Packed: three sequences of 10, 54 and 136 tokens (B = 1); full and a window of 20.
  p.B = 1;
  p.cu_seqlens = {0, 10, 64, 200};
  for (int64_t window : {int64_t(0), int64_t(20)}) {
    p.window = window;
    const double pairs =
        pairs_by_count(10, window) + pairs_by_count(54, window) + pairs_by_count(136, window);
    EXPECT_DOUBLE_EQ(attn::visible_pairs(p), pairs) << window;
    EXPECT_DOUBLE_EQ(attn::find_implementation("attention").flops(p, true), 3 * pairs * 14 * 16);
  }
  // The closed forms: T (T + 1) / 2 in full; w (w + 1) / 2 + (T - w) w with a window w < T.
  p.cu_seqlens.clear();
  p.T = 4096, p.window = 0;
  EXPECT_DOUBLE_EQ(attn::visible_pairs(p), 4096.0 * 4097 / 2);
  p.window = 1024;
  EXPECT_DOUBLE_EQ(attn::visible_pairs(p), 1024.0 * 1025 / 2 + (4096.0 - 1024) * 1024);
}

TEST(EnumTable, NamesParseAndChoices) {
  EXPECT_STREQ(enum_name(gdr::Impl::fused), "fused");
  EXPECT_STREQ(enum_name(nn::Checkpointing::block), "block");
  EXPECT_EQ(enum_table(gdr::Residual{}).parse("full"), gdr::Residual::full);
  EXPECT_FALSE(enum_table(gdr::Residual{}).parse("fat").has_value());
  EXPECT_EQ(enum_table(nn::Checkpointing{}).choices(), "none, block or kernel");
}

TEST(TypedConfig, EnumsBindByNameAndRefuseOthers) {
  train::RunConfig c = train::parse_run_config(
      "model:\n  kernel: fused\n  residual: full\ntrain:\n  checkpointing: kernel\n", "c.yaml");
  EXPECT_EQ(c.model.kernel, gdr::Impl::fused);
  EXPECT_EQ(c.model.residual, gdr::Residual::full);
  EXPECT_EQ(c.train.checkpointing, nn::Checkpointing::kernel);
  // The resolved config writes the names back.
  const std::string yaml = c.to_yaml();
  EXPECT_NE(yaml.find("kernel: fused"), std::string::npos) << yaml;
  EXPECT_NE(yaml.find("checkpointing: kernel"), std::string::npos) << yaml;

  std::string e = error_of([] { train::parse_run_config("model:\n  kernel: ssd\n", "c.yaml"); });
  EXPECT_NE(e.find("c.yaml:2: model.kernel: unknown kernel 'ssd' (expected recurrent, chunked or "
                   "fused)"),
            std::string::npos)
      << e;
  e = error_of([] { train::parse_run_config("", "c.yaml", {"train.checkpointing=layer"}); });
  EXPECT_NE(e.find("(from --set): train.checkpointing: unknown checkpointing 'layer' (expected "
                   "none, block or kernel)"),
            std::string::npos)
      << e;
}

TEST(TokenMixers, TheModelBuildsEachLayerFromTheTable) {
  nn::ModelConfig c;
  c.hidden_size = 32, c.num_hidden_layers = 2, c.num_heads = 2, c.head_dim = 8;
  c.expand_v = 1.0, c.vocab_size = 16, c.use_gate = false;
  const nn::TokenMixerType& t = nn::token_mixer_of(c, 1);
  EXPECT_EQ(std::string(t.name), "gated_deltanet");
  nn::InitContext ctx;
  nn::CausalLM m(c, ctx);
  for (const auto& block : m.model->layers) {
    ASSERT_NE(dynamic_cast<nn::GatedDeltaNet*>(block->attn.get()), nullptr);
    EXPECT_EQ(block->attn->num_parameters(), t.num_parameters(c, 1));
  }
  EXPECT_TRUE(nn::is_mixer_kernel_op("gated_delta_rule"));
  EXPECT_FALSE(nn::is_mixer_kernel_op("rms_norm"));
  const std::string e = error_of([] { nn::find_token_mixer("mamba"); });
  EXPECT_NE(
      e.find(
          "unknown token mixer 'mamba' (known: gated_deltanet, kimi_delta_attention, attention)"),
      std::string::npos)
      << e;
}

// Each mixer claims its layers from the config; exactly one per model_type (the model's own)
// claims none and takes the rest.
TEST(TokenMixers, MixersClaimTheirLayersAndOneTakesTheRest) {
  for (nn::ModelType type : {nn::ModelType::gated_deltanet, nn::ModelType::kda}) {
    int own = 0;
    for (const nn::TokenMixerType& t : nn::token_mixer_types())
      own += !t.claimed_layers && t.own_of == type ? 1 : 0;
    EXPECT_EQ(own, 1) << enum_name(type);
  }
  EXPECT_STREQ(nn::default_token_mixer(nn::ModelConfig{}).name, "gated_deltanet");
  EXPECT_STREQ(nn::default_token_mixer(nn::ModelConfig::kda_defaults()).name,
               "kimi_delta_attention");
  nn::ModelConfig c;
  c.num_hidden_layers = 6;
  nn::AttentionConfig a;
  a.layers = {1, 4};
  a.num_heads = 2;
  c.attn = {a};
  const std::vector<int64_t> claimed = nn::find_token_mixer("attention").claimed_layers(c);
  EXPECT_EQ(claimed, (std::vector<int64_t>{1, 4}));
  for (int64_t l = 0; l < 6; ++l)
    EXPECT_STREQ(nn::token_mixer_of(c, l).name, l == 1 || l == 4 ? "attention" : "gated_deltanet")
        << l;
}

TEST(TokenMixers, GenerationStateIsTheMixersOwn) {
  struct Foreign : nn::MixerState {};
  nn::ModelConfig c;
  c.hidden_size = 16, c.num_hidden_layers = 1, c.num_heads = 1, c.head_dim = 8;
  c.vocab_size = 8;
  nn::InitContext ctx;
  nn::GatedDeltaNet layer(c, ctx);
  nn::LayerState state;  // null: created on first use
  layer.forward_with_state(ops::zeros({1, 2, 16}), state);
  ASSERT_NE(dynamic_cast<nn::GatedDeltaNetState*>(state.get()), nullptr);
  nn::LayerState wrong = std::make_unique<Foreign>();
  const std::string e = error_of([&] { layer.forward_with_state(ops::zeros({1, 1, 16}), wrong); });
  EXPECT_NE(e.find("belongs to another mixer"), std::string::npos) << e;
}

}  // namespace
}  // namespace gdn
