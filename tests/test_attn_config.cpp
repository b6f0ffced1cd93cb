// fla's `attn` (hybrid models: softmax attention beside Gated DeltaNet) in the config layer: the
// YAML key model.attn (dict and list forms, every fla validation error with its key and line,
// --set), config.json both ways (as fla 0.6.0's parse_attention_config fills it), validate,
// model_differences, and the two hybrid configs. Nothing here builds a model: the attention
// mixer is checked by its own tests.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "layers/config.h"
#include "layers/token_mixer.h"
#include "src/train/run_config.h"
#include "tests/fla_config_json.h"
#include "tests/test_helpers.h"

namespace gdn {
namespace {

using nlohmann::json;
using test::error_of;

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// A 4-layer model of width 64; `attn` is appended as the YAML text of model.attn, starting on
// line 7.
std::string model_yaml(const std::string& attn) {
  return "model:\n"
         "  hidden_size: 64\n"
         "  num_hidden_layers: 4\n"
         "  num_heads: 2\n"
         "  head_dim: 32\n"
         "  vocab_size: 256\n" +
         attn;
}

train::RunConfig parse(const std::string& attn, const std::vector<std::string>& sets = {}) {
  return train::parse_run_config(model_yaml(attn), "h.yaml", sets);
}

std::string parse_error(const std::string& attn, const std::vector<std::string>& sets = {}) {
  return error_of([&] { parse(attn, sets); });
}

std::string repo_file(const std::string& relative) {
  return (std::filesystem::path(__FILE__).parent_path().parent_path() / relative).string();
}

// ---- YAML

TEST(AttnYaml, DictFormFillsFlasDefaults) {
  const nn::ModelConfig m = parse("  attn: {layers: [3], num_heads: 4}\n").model;
  ASSERT_EQ(m.attn.size(), 1u);
  EXPECT_FALSE(m.attn_is_list);
  const nn::AttentionConfig& a = m.attn[0];
  EXPECT_EQ(a.layers, std::vector<int64_t>{3});
  EXPECT_EQ(a.num_heads, 4);
  EXPECT_EQ(a.kv_heads(), 4);
  EXPECT_FALSE(a.qkv_bias);
  EXPECT_EQ(a.window_size, 0);
  EXPECT_EQ(a.rope_theta, 10000.0);
  EXPECT_EQ(std::string(nn::token_mixer_of(m, 2).name), "gated_deltanet");
  EXPECT_EQ(std::string(nn::token_mixer_of(m, 3).name), "attention");
}

TEST(AttnYaml, ListFormKeepsEveryField) {
  const nn::ModelConfig m = parse(
                                "  attn:\n"
                                "    - layers: [2, 0]\n"
                                "      num_heads: 4\n"
                                "      num_kv_heads: 2\n"
                                "      qkv_bias: true\n"
                                "      window_size: 128\n"
                                "      rope_theta: 500000\n"
                                "    - layers: [3]\n"
                                "      num_heads: 1\n"
                                "      num_kv_heads: null\n"
                                "      window_size: null\n")
                                .model;
  ASSERT_EQ(m.attn.size(), 2u);
  EXPECT_TRUE(m.attn_is_list);
  EXPECT_EQ(m.attn[0].layers, (std::vector<int64_t>{2, 0}));  // fla keeps the order given
  EXPECT_EQ(m.attn[0].num_heads, 4);
  EXPECT_EQ(m.attn[0].kv_heads(), 2);
  EXPECT_TRUE(m.attn[0].qkv_bias);
  EXPECT_EQ(m.attn[0].window_size, 128);
  EXPECT_EQ(m.attn[0].rope_theta, 500000.0);
  EXPECT_EQ(m.attn[1].kv_heads(), 1);
  EXPECT_EQ(m.attn[1].window_size, 0);
  EXPECT_EQ(std::string(nn::token_mixer_of(m, 1).name), "gated_deltanet");
  for (int64_t layer : {0, 2, 3})
    EXPECT_EQ(std::string(nn::token_mixer_of(m, layer).name), "attention") << layer;
}

TEST(AttnYaml, NullAndEmptyListMeanNoAttention) {
  EXPECT_TRUE(parse("  attn: null\n").model.attn.empty());
  EXPECT_TRUE(parse("").model.attn.empty());
  const nn::ModelConfig empty = parse("  attn: []\n").model;
  EXPECT_TRUE(empty.attn.empty());
  EXPECT_EQ(empty.to_hf_json()["attn"], json::array());  // fla keeps [] as []
}

struct YamlErrorCase {
  std::string attn;   // model.attn's YAML, from line 7
  std::string where;  // the start of the message: file, line, key path
  std::string what;   // a part of the rest
};

TEST(AttnYaml, EveryFlaErrorNamesKeyAndLine) {
  const std::vector<YamlErrorCase> cases = {
      {"  attn: {num_heads: 4}\n", "h.yaml:7: model.attn.layers: ", "is required"},
      {"  attn:\n    - layers: [1]\n", "h.yaml:8: model.attn[0].num_heads: ", "is required"},
      {"  attn: {layers: [4], num_heads: 4}\n",
       "h.yaml:7: model.attn.layers: ", "layer 4 is out of range; expected a value in [0, 4)"},
      {"  attn: {layers: [-1], num_heads: 4}\n",
       "h.yaml:7: model.attn.layers: ", "layer -1 is out of range"},
      {"  attn:\n    layers:\n      - 1\n      - 1\n    num_heads: 4\n",
       "h.yaml:10: model.attn.layers: ", "layer 1 appears twice"},
      {"  attn:\n"
       "    - {layers: [0, 3], num_heads: 4}\n"
       "    - layers: [1, 3]\n"
       "      num_heads: 4\n",
       "h.yaml:9: model.attn[1].layers: ", "layer 3 is already assigned by model.attn[0]"},
      {"  attn: {layers: 3, num_heads: 4}\n",
       "h.yaml:7: model.attn.layers: ", "must be a list of integer layer indices; got 3"},
      {"  attn: {layers: [1, a], num_heads: 4}\n",
       "h.yaml:7: model.attn.layers: ", "must contain only integer layer indices; got \"a\""},
      {"  attn: {layers: [1.0], num_heads: 4}\n",
       "h.yaml:7: model.attn.layers: ", "must contain only integer layer indices; got 1.0"},
      {"  attn: {layers: [1], num_heads: 0}\n",
       "h.yaml:7: model.attn.num_heads: ", "must be a positive integer; got 0"},
      {"  attn: {layers: [1], num_heads: 2.5}\n",
       "h.yaml:7: model.attn.num_heads: ", "must be a positive integer; got 2.5"},
      {"  attn: {layers: [1], num_heads: true}\n",
       "h.yaml:7: model.attn.num_heads: ", "must be a positive integer; got true"},
      {"  attn:\n    layers: [1]\n    num_heads: 4\n    num_kv_heads: 0\n",
       "h.yaml:10: model.attn.num_kv_heads: ", "must be a positive integer"},
      {"  attn:\n    layers: [1]\n    num_heads: 4\n    num_kv_heads: -2\n",
       "h.yaml:10: model.attn.num_kv_heads: ", "got -2"},
      {"  attn:\n    layers: [1]\n    num_heads: 4\n    window_size: 0\n",
       "h.yaml:10: model.attn.window_size: ", "must be null or a positive integer; got 0"},
      {"  attn:\n    layers: [1]\n    num_heads: 4\n    window_size: 1.5\n",
       "h.yaml:10: model.attn.window_size: ", "must be null or a positive integer; got 1.5"},
      {"  attn:\n    layers: [1]\n    num_heads: 4\n    window_size: wide\n",
       "h.yaml:10: model.attn.window_size: ", "got \"wide\""},
      {"  attn:\n    layers: [1]\n    num_heads: 4\n    rope_theta: 0\n",
       "h.yaml:10: model.attn.rope_theta: ", "must be positive and finite; got 0"},
      {"  attn:\n    layers: [1]\n    num_heads: 4\n    rope_theta: -5.0\n",
       "h.yaml:10: model.attn.rope_theta: ", "must be positive and finite; got -5"},
      {"  attn:\n    layers: [1]\n    num_heads: 4\n    rope_theta: .inf\n",
       "h.yaml:10: model.attn.rope_theta: ", "must be positive and finite; got inf"},
      {"  attn:\n    layers: [1]\n    num_heads: 4\n    rope_theta: .nan\n",
       "h.yaml:10: model.attn.rope_theta: ", "must be positive and finite"},
      {"  attn:\n    layers: [1]\n    num_heads: 4\n    rope_theta: big\n",
       "h.yaml:10: model.attn.rope_theta: ", "must be positive and finite; got \"big\""},
      {"  attn:\n    layers: [1]\n    num_heads: 4\n    qkv_bias: 1\n",
       "h.yaml:10: model.attn.qkv_bias: ", "must be true or false (a Boolean); got 1"},
      {"  attn:\n    layers: [1]\n    num_heads: 4\n    qkv_bias: \"true\"\n",
       "h.yaml:10: model.attn.qkv_bias: ", "got \"true\""},
      {"  attn:\n    layers: [1]\n    num_heads: 4\n    qkv_bias: null\n",
       "h.yaml:10: model.attn.qkv_bias: ", "got null"},
      {"  attn:\n    - layers: [1]\n      num_heads: 4\n      qk_norm: true\n",
       "h.yaml:10: model.attn[0].qk_norm: ", "unknown key"},
      {"  attn: [3]\n", "h.yaml:7: model.attn[0]: ", "must be a mapping of attention settings"},
      {"  attn: 3\n", "h.yaml:7: model.attn: ", "must be null, a mapping or a list of mappings"},
      {"  attn: {layers: [1], num_heads: 3}\n",
       "h.yaml:7: model.attn.num_heads: ", "hidden_size 64 is not divisible by num_heads 3"},
      {"  attn:\n    layers: [1]\n    num_heads: 4\n    num_kv_heads: 3\n",
       "h.yaml:10: model.attn.num_kv_heads: ", "num_heads 4 is not divisible by num_kv_heads 3"},
  };
  for (const YamlErrorCase& c : cases) {
    const std::string e = parse_error(c.attn);
    EXPECT_EQ(e.rfind(c.where, 0), 0u) << c.attn << "-> " << e;
    EXPECT_TRUE(contains(e, c.what)) << c.attn << "-> " << e;
  }
}

TEST(AttnYaml, ChecksReadSizesGivenAfterAttn) {
  // attn before num_hidden_layers and hidden_size in the file, or the sizes from --set.
  const std::string text =
      "model:\n"
      "  attn: {layers: [5], num_heads: 8}\n"
      "  num_hidden_layers: 6\n"
      "  hidden_size: 128\n"
      "  num_heads: 2\n"
      "  head_dim: 32\n"
      "  vocab_size: 256\n";
  EXPECT_EQ(
      std::string(nn::token_mixer_of(train::parse_run_config(text, "late.yaml").model, 5).name),
      "attention");
  const std::string e =
      error_of([&] { train::parse_run_config(text, "late.yaml", {"model.num_hidden_layers=5"}); });
  EXPECT_EQ(e.rfind("late.yaml:2: model.attn.layers: layer 5 is out of range", 0), 0u) << e;
}

TEST(AttnYaml, SetTakesAMappingOrAList) {
  const nn::ModelConfig one = parse("", {"model.attn={layers: [3], num_heads: 4}"}).model;
  ASSERT_EQ(one.attn.size(), 1u);
  EXPECT_FALSE(one.attn_is_list);
  EXPECT_EQ(one.attn[0].layers, std::vector<int64_t>{3});
  const nn::ModelConfig two =
      parse("  attn: {layers: [1], num_heads: 2}\n",
            {"model.attn=[{layers: [0], num_heads: 2}, {layers: [3], num_heads: 4}]"})
          .model;
  EXPECT_TRUE(two.attn_is_list);
  EXPECT_EQ(two.attn.size(), 2u);
  EXPECT_TRUE(
      parse("  attn: {layers: [1], num_heads: 2}\n", {"model.attn=null"}).model.attn.empty());
  // Errors name the --set, never a line of the file.
  const std::string set = "model.attn=[{layers: [3], num_heads: 4}, {layers: [3], num_heads: 2}]";
  const std::string e = parse_error("  attn: {layers: [1], num_heads: 2}\n", {set});
  EXPECT_EQ(e.rfind("'" + set + "' (from --set): model.attn[1].layers: ", 0), 0u) << e;
  EXPECT_TRUE(contains(e, "layer 3 is already assigned by model.attn[0]")) << e;
  const std::string inner =
      parse_error("  attn: {layers: [1], num_heads: 2}\n", {"model.attn.num_heads=4"});
  EXPECT_TRUE(contains(inner, "'model.attn' takes its whole value")) << inner;
}

TEST(AttnYaml, ResolvedConfigRoundTrips) {
  const train::RunConfig c = parse(
      "  attn:\n"
      "    - {layers: [0], num_heads: 4, num_kv_heads: 1, window_size: 64, rope_theta: 1e6}\n"
      "    - {layers: [3], num_heads: 2, qkv_bias: true}\n");
  const std::string yaml = c.to_yaml();
  const nn::ModelConfig back = train::parse_run_config(yaml, "resolved.yaml").model;
  EXPECT_TRUE(nn::model_differences(c.model, back).empty()) << yaml;
  EXPECT_TRUE(back.attn_is_list);
  EXPECT_EQ(back.to_hf_json()["attn"], c.model.to_hf_json()["attn"]) << yaml;
  const nn::ModelConfig none = train::parse_run_config(parse("").to_yaml(), "r.yaml").model;
  EXPECT_TRUE(none.attn.empty());
}

// ---- ModelConfig::validate

TEST(AttnValidate, SameRulesWithoutAFile) {
  nn::ModelConfig m = parse("").model;
  m.attn = {{{0, 3}, 2}, {{3}, 2}};
  m.attn_is_list = true;
  EXPECT_EQ(error_of([&] {
              m.validate();
            }).rfind("model.attn[1].layers: layer 3 is already assigned by model.attn[0]", 0),
            0u);
  m.attn = {{{1}, 2}};
  m.attn_is_list = false;
  EXPECT_NO_THROW(m.validate());
  m.attn[0].window_size = -1;
  EXPECT_EQ(error_of([&] { m.validate(); }).rfind("model.attn.window_size: ", 0), 0u);
  m.attn[0].window_size = 0;
  m.attn[0].num_kv_heads = 3;
  EXPECT_TRUE(contains(error_of([&] { m.validate(); }), "not divisible by num_kv_heads 3"));
  m.attn[0].num_kv_heads = 0;
  m.attn[0].rope_theta = 0;
  EXPECT_EQ(error_of([&] { m.validate(); }).rfind("model.attn.rope_theta: ", 0), 0u);
}

// ---- config.json

// fla 0.6.0: GatedDeltaNetConfig(attn=...).to_dict()["attn"] after parse_attention_config: every
// default filled, the dict form kept.
const char* const kFlaDictAttn =
    R"({"layers": [3], "num_heads": 4, "num_kv_heads": 4, "qkv_bias": false,
        "window_size": null, "rope_theta": 10000.0})";
const char* const kFlaListAttn =
    R"([{"layers": [2, 0], "num_heads": 4, "num_kv_heads": 2, "qkv_bias": true,
         "window_size": 128, "rope_theta": 500000.0},
        {"layers": [3], "num_heads": 1, "num_kv_heads": 1, "qkv_bias": false,
         "window_size": null, "rope_theta": 10000.0}])";

TEST(AttnJson, WritesAttnAsFlaHoldsIt) {
  const nn::ModelConfig dict = parse("  attn: {layers: [3], num_heads: 4}\n").model;
  const json jd = dict.to_hf_json();
  EXPECT_EQ(jd["attn"], json::parse(kFlaDictAttn));
  EXPECT_TRUE(contains(jd["attn"].dump(), "\"rope_theta\":10000.0")) << jd["attn"].dump();
  const nn::ModelConfig list = parse(
                                   "  attn:\n"
                                   "    - {layers: [2, 0], num_heads: 4, num_kv_heads: 2,\n"
                                   "       qkv_bias: true, window_size: 128, rope_theta: 500000}\n"
                                   "    - {layers: [3], num_heads: 1}\n")
                                   .model;
  EXPECT_EQ(list.to_hf_json()["attn"], json::parse(kFlaListAttn));
  EXPECT_TRUE(parse("").model.to_hf_json()["attn"].is_null());
  // A one-entry list stays a list.
  EXPECT_TRUE(
      parse("  attn: [{layers: [3], num_heads: 4}]\n").model.to_hf_json()["attn"].is_array());
}

TEST(AttnJson, RoundTripsBothForms) {
  for (const char* attn : {"  attn: {layers: [3], num_heads: 4}\n",
                           "  attn: [{layers: [3], num_heads: 4, window_size: 16}]\n",
                           "  attn:\n    - {layers: [0, 2], num_heads: 2, qkv_bias: true}\n"
                           "    - {layers: [3], num_heads: 4, num_kv_heads: 1}\n"}) {
    const nn::ModelConfig c = parse(attn).model;
    const json j = c.to_hf_json();
    const nn::ModelConfig back = nn::ModelConfig::from_hf_json(j);
    EXPECT_TRUE(nn::model_differences(c, back).empty()) << attn;
    EXPECT_EQ(back.attn_is_list, c.attn_is_list) << attn;
    EXPECT_EQ(back.to_hf_json(), j) << attn;
  }
}

// A config.json as fla 0.6.0's GatedDeltaNetConfig.save_pretrained writes it for a 4-layer
// hybrid (hidden 64, 2 heads of 32, expand_v 2, vocab 256), with `attn` as given.
json fla_config_json(const json& attn) {
  nn::ModelConfig c;
  c.hidden_size = 64, c.num_hidden_layers = 4, c.num_heads = 2, c.head_dim = 32;
  c.expand_v = 2.0, c.vocab_size = 256, c.tie_word_embeddings = false;
  return test::fla_config_json(c, attn);
}

TEST(AttnJson, FlasConfigWithAttnLoads) {
  const nn::ModelConfig list =
      nn::ModelConfig::from_hf_json(fla_config_json(json::parse(kFlaListAttn)));
  EXPECT_TRUE(list.attn_is_list);
  ASSERT_EQ(list.attn.size(), 2u);
  EXPECT_EQ(list.attn[0].layers, (std::vector<int64_t>{2, 0}));
  EXPECT_EQ(list.attn[0].kv_heads(), 2);
  EXPECT_TRUE(list.attn[0].qkv_bias);
  EXPECT_EQ(list.attn[0].window_size, 128);
  EXPECT_EQ(list.attn[0].rope_theta, 500000.0);
  EXPECT_EQ(list.to_hf_json()["attn"], json::parse(kFlaListAttn));
  // As a user writes it before fla parses it: fla fills the defaults, and so does gdn.
  const nn::ModelConfig dict =
      nn::ModelConfig::from_hf_json(fla_config_json({{"layers", {3}}, {"num_heads", 4}}));
  EXPECT_FALSE(dict.attn_is_list);
  EXPECT_EQ(dict.to_hf_json()["attn"], json::parse(kFlaDictAttn));
  // rope_theta as an integer, num_kv_heads and window_size null: what fla accepts.
  const nn::ModelConfig ints = nn::ModelConfig::from_hf_json(fla_config_json(
      {{"layers", {1}}, {"num_heads", 2}, {"num_kv_heads", nullptr}, {"rope_theta", 500000}}));
  EXPECT_EQ(ints.attn[0].rope_theta, 500000.0);
  EXPECT_EQ(ints.attn[0].kv_heads(), 2);
}

TEST(AttnJson, ErrorsNameTheField) {
  const json good = {{"layers", {1}}, {"num_heads", 2}};
  auto error = [&](const json& attn) {
    return error_of([&] { nn::ModelConfig::from_hf_json(fla_config_json(attn)); });
  };
  auto with = [&](const char* key, const json& v) {
    json a = good;
    a[key] = v;
    return a;
  };
  const std::vector<std::pair<json, std::string>> cases = {
      {json("yes"), "config.json: field 'attn': must be null, a mapping or a list of mappings"},
      {json::array({good, json::array()}), "config.json: field 'attn[1]': must be a mapping"},
      {json{{"num_heads", 2}}, "config.json: field 'attn.layers': is required"},
      {json{{"layers", {1}}}, "config.json: field 'attn.num_heads': is required"},
      {json::array({good, good}),
       "config.json: field 'attn[1].layers': layer 1 is already assigned by attn[0]"},
      {with("layers", {1, 1}), "config.json: field 'attn.layers': layer 1 appears twice"},
      {with("layers", {4}), "config.json: field 'attn.layers': layer 4 is out of range"},
      {with("layers", {1.0}), "field 'attn.layers': must contain only integer layer indices"},
      {with("layers", {true}), "field 'attn.layers': must contain only integer layer indices"},
      {with("num_heads", 2.0), "field 'attn.num_heads': must be a positive integer; got 2.0"},
      {with("num_heads", -2), "field 'attn.num_heads': must be a positive integer; got -2"},
      {with("num_kv_heads", 0), "field 'attn.num_kv_heads': must be a positive integer"},
      {with("qkv_bias", 1), "field 'attn.qkv_bias': must be true or false (a Boolean); got 1"},
      {with("window_size", 0), "field 'attn.window_size': must be null or a positive integer"},
      {with("window_size", false), "field 'attn.window_size': must be null or a positive integer"},
      {with("rope_theta", -1.0), "field 'attn.rope_theta': must be positive and finite; got -1"},
      {with("rope_theta", nullptr), "field 'attn.rope_theta': must be positive and finite"},
      {with("qk_norm", true), "config.json: field 'attn.qk_norm': unknown key"},
      {with("num_heads", 3), "field 'attn.num_heads': hidden_size 64 is not divisible by"},
  };
  for (const auto& [attn, needle] : cases) {
    const std::string e = error(attn);
    EXPECT_TRUE(contains(e, needle)) << attn.dump() << " -> " << e;
  }
}

// ---- model_differences

TEST(AttnDifferences, ComparesWhichLayerGetsWhichAttention) {
  auto model = [](const std::string& attn) { return parse(attn).model; };
  const nn::ModelConfig base = model("  attn: {layers: [1, 3], num_heads: 4}\n");
  // The same layers and settings, given another way: no difference.
  for (const char* same : {"  attn: [{layers: [3, 1], num_heads: 4, num_kv_heads: 4}]\n",
                           "  attn: [{layers: [3], num_heads: 4}, {layers: [1], num_heads: 4}]\n",
                           "  attn: {layers: [1, 3], num_heads: 4, rope_theta: 10000.0}\n"})
    EXPECT_EQ(nn::model_differences(base, model(same)), std::vector<std::string>{}) << same;
  for (const char* other : {"  attn: {layers: [1, 3], num_heads: 2}\n",
                            "  attn: {layers: [1, 3], num_heads: 4, num_kv_heads: 2}\n",
                            "  attn: {layers: [1, 3], num_heads: 4, qkv_bias: true}\n",
                            "  attn: {layers: [1, 3], num_heads: 4, window_size: 8}\n",
                            "  attn: {layers: [1, 3], num_heads: 4, rope_theta: 1e6}\n",
                            "  attn: {layers: [1, 2], num_heads: 4}\n", ""}) {
    const std::vector<std::string> d = nn::model_differences(base, model(other));
    ASSERT_EQ(d.size(), 1u) << other;
    EXPECT_EQ(d[0].rfind("attn (layers [1, 3]: num_heads=4, num_kv_heads=4", 0), 0u) << d[0];
  }
  EXPECT_EQ(nn::model_differences(model(""), base)[0].rfind("attn (none vs layers [1, 3]", 0), 0u);
  // An entry of no layers (fla accepts it) changes nothing.
  EXPECT_TRUE(
      nn::model_differences(model(""), model("  attn: {layers: [], num_heads: 4}\n")).empty());
}

// ---- the hybrid configs

// fla's Attention: q and o hidden x hidden, k and v hidden x (num_kv_heads * head_dim), the
// biases of q, k and v with qkv_bias.
int64_t attention_parameters(const nn::ModelConfig& c, const nn::AttentionConfig& a) {
  const int64_t h = c.hidden_size, kv = a.kv_heads() * a.head_dim(h);
  return 2 * h * h + 2 * h * kv + (a.qkv_bias ? h + 2 * kv : 0);
}

// The model's parameters by formula, the attention layers counted by attention_parameters (the
// Gated DeltaNet layers by their registered mixer).
int64_t hybrid_parameters(const nn::ModelConfig& c) {
  const int64_t h = c.hidden_size, emb = c.vocab_size * h;
  int64_t n = emb + h + (c.tie_word_embeddings ? 0 : emb);
  const nn::TokenMixerType& gdn = nn::find_token_mixer("gated_deltanet");
  for (int64_t layer = 0; layer < c.num_hidden_layers; ++layer) {
    const nn::AttentionConfig* a = c.attention_of(layer);
    n += a ? attention_parameters(c, *a) : gdn.num_parameters(c, layer);
    n += 3 * h * c.mlp_intermediate_size() + 2 * h;
  }
  return n;
}

TEST(AttnConfigs, HybridIsDefaultWithAttentionInLayer3) {
  const train::RunConfig c = train::load_run_config(repo_file("configs/hybrid.yaml"));
  const train::RunConfig d = train::load_run_config(repo_file("configs/default.yaml"));
  ASSERT_EQ(c.model.num_hidden_layers, 4);
  for (int64_t layer : {0, 1, 2})
    EXPECT_EQ(std::string(nn::token_mixer_of(c.model, layer).name), "gated_deltanet");
  EXPECT_EQ(std::string(nn::token_mixer_of(c.model, 3).name), "attention");
  // Otherwise default.yaml's model and job.
  const std::vector<std::string> diff = nn::model_differences(c.model, d.model);
  ASSERT_EQ(diff.size(), 1u);
  EXPECT_EQ(diff[0].rfind("attn (", 0), 0u);
  EXPECT_EQ(c.data.seq_len, d.data.seq_len);
  EXPECT_EQ(c.train.steps, d.train.steps);
  EXPECT_EQ(c.train.batch_size, d.train.batch_size);
  const nn::ModelConfig back = nn::ModelConfig::from_hf_json(c.model.to_hf_json());
  EXPECT_TRUE(nn::model_differences(c.model, back).empty());
}

TEST(AttnConfigs, H1Is1p3BWithAttentionInEvery4thLayer) {
  const train::RunConfig c = train::load_run_config(repo_file("configs/gdn-h1-1.3b-8k.yaml"));
  const nn::ModelConfig& m = c.model;
  ASSERT_EQ(m.num_hidden_layers, 24);
  for (int64_t layer = 0; layer < m.num_hidden_layers; ++layer)
    EXPECT_EQ(std::string(nn::token_mixer_of(m, layer).name),
              layer % 4 == 3 ? "attention" : "gated_deltanet")
        << layer;
  EXPECT_EQ(c.data.seq_len, 8192);
  EXPECT_EQ(c.train.dtype, DType::bfloat16);
  EXPECT_EQ(c.train.checkpointing, nn::Checkpointing::block);
  const int64_t n = hybrid_parameters(m);
  EXPECT_EQ(n, 1300093872);
  // Not above gdn-1.3b-8k's size (1,322,323,704): it fits the same card
  // (docs/memory/gdn-h1-1.3b-8k.md).
  const train::RunConfig dense = train::load_run_config(repo_file("configs/gdn-1.3b-8k.yaml"));
  EXPECT_LE(n, dense.model.num_parameters());
}

// num_parameters() counts through the registered mixers (layers/attention.h for attention): it
// agrees with fla's formula above.
TEST(AttnConfigs, NumParametersCountsAttentionLayers) {
  const train::RunConfig c = train::load_run_config(repo_file("configs/gdn-h1-1.3b-8k.yaml"));
  EXPECT_EQ(c.model.num_parameters(), hybrid_parameters(c.model));
  const train::RunConfig small = train::load_run_config(repo_file("configs/hybrid.yaml"));
  EXPECT_EQ(small.model.num_parameters(), hybrid_parameters(small.model));
}

}  // namespace
}  // namespace gdn
