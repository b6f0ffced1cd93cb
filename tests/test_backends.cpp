// The backend choices as model keys, resolved once (layers/config.h): model.attention_impl,
// conv1d_impl, fused_vt and fused_sub parse from YAML (bad values refused naming the key), round
// trip through config.json's gdn section, reach the layers that use them; and the environment's
// overrides (GDN_ATTENTION, GDN_CONV1D, GDN_FUSED_VT, GDN_FUSED_SUB) are read once per process,
// said on stderr, and a bad value is refused naming the variable. No op reads the environment.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "layers/model.h"
#include "layers/short_conv.h"
#include "src/train/run_config.h"
#include "tests/test_helpers.h"

namespace gdn {
namespace {

const char* kModel = R"(model:
  hidden_size: 32
  num_hidden_layers: 1
  num_heads: 2
  head_dim: 16
  vocab_size: 64
)";

train::RunConfig parse(const std::vector<std::string>& sets) {
  return train::parse_run_config(kModel, "b.yaml", sets);
}

TEST(Backends, ModelKeysParseRoundTripAndReachTheLayers) {
  const train::RunConfig c = parse({"model.attention_impl=flash", "model.conv1d_impl=cudnn",
                                    "model.fused_vt=32", "model.fused_sub=16"});
  EXPECT_EQ(c.model.attention_impl, attn::Impl::flash);
  EXPECT_EQ(c.model.conv1d_impl, cuda::Conv1dImpl::cudnn);
  EXPECT_EQ(c.model.fused_vt, 32);
  EXPECT_EQ(c.model.fused_sub, 16);
  const nn::ModelConfig back = nn::ModelConfig::from_hf_json(c.model.to_hf_json());
  EXPECT_EQ(back.attention_impl, attn::Impl::flash);
  EXPECT_EQ(back.conv1d_impl, cuda::Conv1dImpl::cudnn);
  EXPECT_EQ(back.fused_vt, 32);
  EXPECT_EQ(back.fused_sub, 16);
  // Execution only: the model is the same one.
  EXPECT_TRUE(nn::model_differences(c.model, parse({}).model).empty());
  // The defaults: auto, direct, the plan's choice.
  const train::RunConfig d = parse({});
  EXPECT_EQ(d.model.attention_impl, attn::Impl::automatic);
  EXPECT_EQ(d.model.conv1d_impl, cuda::Conv1dImpl::direct);
  EXPECT_EQ(d.model.fused_vt, 0);
  // The short convs take the model's conv path (when no GDN_CONV1D overrides it).
  if (!nn::backend_overrides().conv1d) {
    nn::CausalLM m(c.model, nn::InitContext{});
    int convs = 0;
    for (const nn::Module* mod : m.modules())
      if (const auto* conv = dynamic_cast<const nn::ShortConv*>(mod)) {
        EXPECT_EQ(conv->impl, cuda::Conv1dImpl::cudnn);
        ++convs;
      }
    EXPECT_EQ(convs, 3);
  }
}

TEST(Backends, BadValuesAreRefusedNamingTheKey) {
  const std::pair<const char*, const char*> bad[] = {
      {"model.attention_impl=cuDNN", "model.attention_impl"},
      {"model.conv1d_impl=fast", "model.conv1d_impl"},
      {"model.fused_vt=48", "model.fused_vt"},
      {"model.fused_sub=-16", "model.fused_sub"}};
  for (const auto& [set, key] : bad) {
    try {
      train::RunConfig c = parse({set});
      c.model.validate();
      ADD_FAILURE() << set << " accepted";
    } catch (const std::exception& e) {
      EXPECT_NE(std::string(e.what()).find(key), std::string::npos) << set << ": " << e.what();
    }
  }
}

// The environment, read once per process: through the gdn program (a process of its own).
int run_gdn(const std::string& env, const std::string& args, const std::string& out) {
  const std::string cmd = env + " " + test::gdn_binary() + " " + args + " >" + out + " 2>&1";
  const int rc = std::system(cmd.c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

TEST(Backends, TheEnvironmentOverridesOnceAndBadValuesAreNamed) {
  if (test::gdn_binary().empty()) GTEST_SKIP() << "no gdn program beside the tests";
  test::TempDir dir("backends");
  const std::string cfg = dir.file("m.yaml"), out = dir.file("out.txt");
  test::write_file(cfg, kModel);
  const std::string profile = "profile-memory " + cfg + " --device meta --seq 32 --batch 1";
  ASSERT_EQ(run_gdn("GDN_FUSED_VT=32 GDN_ATTENTION=flash", profile, out), 0)
      << test::read_file(out);
  const std::string said = test::read_file(out);
  const std::string line =
      "gdn: backends from the environment (over the model keys): "
      "GDN_ATTENTION=flash GDN_FUSED_VT=32";
  EXPECT_NE(said.find(line), std::string::npos) << said;
  EXPECT_EQ(said.find(line), said.rfind(line)) << "said more than once: " << said;
  for (const auto& [env, name] :
       {std::pair<const char*, const char*>{"GDN_CONV1D=cuDNN", "GDN_CONV1D='cuDNN'"},
        {"GDN_ATTENTION=fast", "GDN_ATTENTION='fast'"},
        {"GDN_FUSED_SUB=48", "GDN_FUSED_SUB='48'"}}) {
    EXPECT_EQ(run_gdn(env, profile, out), 1) << env;
    EXPECT_NE(test::read_file(out).find(name), std::string::npos) << test::read_file(out);
  }
}

}  // namespace
}  // namespace gdn
