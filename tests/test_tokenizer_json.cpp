// tokenizer.json reader against the Hugging Face `tokenizers` library: fixtures made by
// scripts/make_tokenizer_fixtures.py (the library trained each family's tokenizer and wrote the
// ids and decoded text it gives for each document); every id and every decoded text must match.
#include <gtest/gtest.h>

#include <unistd.h>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "src/core/error.h"
#include "src/data/tokenizer_json.h"
#include "src/data/tokenizer_json_regex.h"

namespace gdn::data {
namespace {

namespace fs = std::filesystem;

std::string fixtures_dir() {
  if (const char* d = std::getenv("GDN_TEST_DATA")) return std::string(d) + "/tokenizers";
#ifdef GDN_SOURCE_DIR
  return std::string(GDN_SOURCE_DIR) + "/tests/data/tokenizers";
#else
  return "tests/data/tokenizers";
#endif
}

std::string family_file(const std::string& family) {
  return fixtures_dir() + "/" + family + "/tokenizer.json";
}

std::string read_all(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

struct Case {
  std::string text;
  std::vector<int32_t> ids;
  std::string decoded;
};

std::vector<Case> read_cases(const std::string& family) {
  std::string path = fixtures_dir() + "/" + family + "/cases.jsonl";
  std::ifstream f(path);
  EXPECT_TRUE(f) << "missing fixture " << path;
  std::vector<Case> cases;
  std::string line;
  while (std::getline(f, line)) {
    if (line.empty()) continue;
    auto j = nlohmann::json::parse(line);
    cases.push_back({j.at("text").get<std::string>(), j.at("ids").get<std::vector<int32_t>>(),
                     j.at("decoded").get<std::string>()});
  }
  return cases;
}

// Shows a text with its control characters escaped, for failure messages.
std::string visible(const std::string& s) {
  return nlohmann::json(s).dump();
}

std::string ids_str(const std::vector<int32_t>& ids) {
  return nlohmann::json(ids).dump();
}

class Family : public ::testing::TestWithParam<std::string> {};

TEST_P(Family, EncodeGivesTheLibrarysIds) {
  JsonTokenizer tok(family_file(GetParam()));
  auto cases = read_cases(GetParam());
  ASSERT_GE(cases.size(), 80u);
  for (const Case& c : cases) {
    EXPECT_EQ(ids_str(tok.encode(c.text)), ids_str(c.ids)) << "text " << visible(c.text);
  }
}

TEST_P(Family, DecodeGivesTheLibrarysText) {
  JsonTokenizer tok(family_file(GetParam()));
  auto cases = read_cases(GetParam());
  ASSERT_GE(cases.size(), 80u);
  for (const Case& c : cases) {
    EXPECT_EQ(visible(tok.decode(c.ids)), visible(c.decoded))
        << "ids " << ids_str(c.ids) << " of " << visible(c.text);
  }
}

TEST_P(Family, BatchOnTwoThreadsEqualsSequentialEncode) {
  JsonTokenizer tok(family_file(GetParam()));
  auto cases = read_cases(GetParam());
  ASSERT_FALSE(cases.empty());
  // Many documents, each several cases joined, so both threads share the merge cache.
  std::vector<std::string> texts;
  for (int rep = 0; rep < 30; ++rep) {
    for (size_t i = 0; i < cases.size(); ++i) {
      texts.push_back(cases[i].text + "\n" + cases[(i * 7 + rep) % cases.size()].text);
    }
  }
  std::vector<std::string_view> docs(texts.begin(), texts.end());
  std::vector<std::vector<int32_t>> batch;
  tok.encode_batch(docs, batch, 2);
  ASSERT_EQ(batch.size(), docs.size());
  JsonTokenizer fresh(family_file(GetParam()));  // its own, cold cache
  for (size_t i = 0; i < docs.size(); ++i) {
    ASSERT_EQ(ids_str(batch[i]), ids_str(fresh.encode(docs[i]))) << "doc " << visible(texts[i]);
  }
}

INSTANTIATE_TEST_SUITE_P(TokenizerJson, Family,
                         ::testing::Values("gpt2", "llama3", "qwen", "llama2", "mistral",
                                           "wordpiece_style", "splits"),
                         [](const auto& info) { return info.param; });

TEST(TokenizerJson, InterfaceAndAddedTokens) {
  std::string path = family_file("gpt2");
  auto j = nlohmann::json::parse(read_all(path));
  JsonTokenizer tok(path);
  EXPECT_EQ(tok.name(), "tokenizer.json");
  EXPECT_EQ(tok.bos_id(), -1);
  EXPECT_EQ(tok.eos_id(), -1);
  int64_t max_id = -1;
  for (auto& [k, v] : j["model"]["vocab"].items()) max_id = std::max<int64_t>(max_id, v.get<int>());
  for (auto& t : j["added_tokens"]) max_id = std::max<int64_t>(max_id, t["id"].get<int>());
  EXPECT_EQ(tok.vocab_size(), max_id + 1);
  ASSERT_EQ(tok.added_tokens().size(), j["added_tokens"].size());
  for (size_t k = 0; k < j["added_tokens"].size(); ++k) {
    const auto& want = j["added_tokens"][k];
    const JsonTokenizer::AddedToken& got = tok.added_tokens()[k];
    EXPECT_EQ(got.id, want["id"].get<int>());
    EXPECT_EQ(got.content, want["content"].get<std::string>());
    EXPECT_EQ(got.lstrip, want["lstrip"].get<bool>());
    EXPECT_EQ(got.rstrip, want["rstrip"].get<bool>());
    EXPECT_EQ(got.single_word, want["single_word"].get<bool>());
    EXPECT_EQ(got.normalized, want["normalized"].get<bool>());
    EXPECT_EQ(got.special, want["special"].get<bool>());
    EXPECT_EQ(tok.token_to_id(got.content), got.id);
    EXPECT_EQ(tok.id_to_token(got.id), got.content);
  }
  auto eot = tok.token_to_id("<|endoftext|>");
  ASSERT_TRUE(eot.has_value());
  EXPECT_EQ(tok.encode("<|endoftext|>"), std::vector<int32_t>{*eot});
  EXPECT_EQ(tok.token_to_id("Ġthe"), j["model"]["vocab"]["Ġthe"].get<int>());
  EXPECT_EQ(tok.id_to_token(j["model"]["vocab"]["Ġthe"].get<int>()), "Ġthe");
  EXPECT_FALSE(tok.token_to_id("no such token").has_value());
  EXPECT_EQ(tok.file_bytes(), read_all(path));
}

TEST(TokenizerJson, DecodeRefusesIdsOutsideTheVocabulary) {
  JsonTokenizer tok(family_file("llama3"));
  EXPECT_THROW(tok.decode({0, static_cast<int32_t>(tok.vocab_size())}), Error);
  EXPECT_THROW(tok.decode({-1}), Error);
  EXPECT_NO_THROW(tok.decode({static_cast<int32_t>(tok.vocab_size() - 1)}));
}

TEST(TokenizerJson, EncodeRefusesInvalidUtf8) {
  JsonTokenizer tok(family_file("gpt2"));
  EXPECT_THROW(tok.encode(std::string("ab\xC3", 3)), Error);
  EXPECT_THROW(tok.encode(std::string("\xED\xA0\x80", 3)), Error);  // a surrogate
}

TEST(TokenizerJson, SaveWritesTheFileVerbatim) {
  std::string path = family_file("qwen");
  auto tok = load_tokenizer_json(path);
  fs::path dir = fs::temp_directory_path() / ("gdn_tokjson_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::string written = tok->save(dir.string());
  EXPECT_EQ(written, (dir / "tokenizer.json").string());
  EXPECT_EQ(read_all(written), read_all(path));
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 1);
  // What was written loads and encodes the same.
  JsonTokenizer again(written);
  EXPECT_EQ(again.encode("Hello <|im_start|> world"), tok->encode("Hello <|im_start|> world"));
  fs::remove_all(dir);
  EXPECT_THROW(tok->save((dir / "missing").string()), Error);
}

// Each unsupported file is refused at load with the component's name and the file's path.
TEST(TokenizerJson, RefusesUnsupportedComponents) {
  const std::pair<const char*, const char*> files[] = {
      {"wordpiece.json", "model type \"WordPiece\""},
      {"unigram.json", "model type \"Unigram\""},
      {"bert_normalizer.json", "normalizer type \"BertNormalizer\""},
      {"whitespace_pre_tokenizer.json", "pre_tokenizer type \"Whitespace\""},
      {"wordpiece_decoder.json", "decoder type \"WordPiece\""},
      {"dropout.json", "dropout"},
      {"truncation.json", "truncation"},
  };
  for (const auto& [file, what] : files) {
    std::string path = fixtures_dir() + "/unsupported/" + file;
    ASSERT_TRUE(fs::exists(path)) << path;
    try {
      JsonTokenizer tok(path);
      ADD_FAILURE() << path << " was accepted";
    } catch (const Error& e) {
      std::string msg = e.what();
      EXPECT_NE(msg.find(what), std::string::npos) << msg;
      EXPECT_NE(msg.find(path), std::string::npos) << msg;
    }
  }
}

std::string write_temp(const std::string& name, const std::string& text) {
  fs::path p = fs::temp_directory_path() / (std::to_string(::getpid()) + "_" + name);
  std::ofstream(p, std::ios::binary) << text;
  return p.string();
}

std::string load_error(const std::string& path) {
  try {
    JsonTokenizer tok(path);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(TokenizerJson, MalformedFiles) {
  std::string bad = write_temp("bad.json", "{\"version\": \"1.0\", \"model\": {");
  std::string msg = load_error(bad);
  EXPECT_NE(msg.find("not valid JSON"), std::string::npos) << msg;
  EXPECT_NE(msg.find(bad), std::string::npos) << msg;
  fs::remove(bad);

  std::string no_model =
      write_temp("no_model.json", "{\"version\": \"1.0\", \"added_tokens\": []}");
  msg = load_error(no_model);
  EXPECT_NE(msg.find("no \"model\""), std::string::npos) << msg;
  EXPECT_NE(msg.find(no_model), std::string::npos) << msg;
  fs::remove(no_model);

  auto j = nlohmann::json::parse(read_all(family_file("gpt2")));
  j["model"]["merges"].push_back("Ġthe not-in-vocab");
  std::string bad_merge = write_temp("bad_merge.json", j.dump());
  msg = load_error(bad_merge);
  EXPECT_NE(msg.find("not-in-vocab"), std::string::npos) << msg;
  fs::remove(bad_merge);

  j = nlohmann::json::parse(read_all(family_file("gpt2")));
  j["pre_tokenizer"] = {{"type", "Split"},
                        {"pattern", {{"Regex", "\\bword\\b"}}},
                        {"behavior", "Isolated"},
                        {"invert", false}};
  std::string boundary = write_temp("boundary.json", j.dump());
  msg = load_error(boundary);
  EXPECT_NE(msg.find("word boundaries"), std::string::npos) << msg;
  fs::remove(boundary);

  msg = load_error(fixtures_dir() + "/no_such_family/tokenizer.json");
  EXPECT_NE(msg.find("cannot open"), std::string::npos) << msg;
}

// Sections that do not change encode(text, add_special_tokens=False) are accepted; the others are
// refused, naming them.
TEST(TokenizerJson, PaddingAndPostProcessors) {
  const std::string text = "Hello <|endoftext|> world";
  JsonTokenizer plain(family_file("gpt2"));
  auto variant = [&](const char* key, const nlohmann::json& value) {
    auto j = nlohmann::json::parse(read_all(family_file("gpt2")));
    j[key] = value;
    return write_temp(std::string(key) + ".json", j.dump());
  };
  std::string ok = variant("padding", {{"strategy", "BatchLongest"},
                                       {"direction", "Right"},
                                       {"pad_to_multiple_of", nullptr},
                                       {"pad_id", 0},
                                       {"pad_type_id", 0},
                                       {"pad_token", "<|endoftext|>"}});
  EXPECT_EQ(JsonTokenizer(ok).encode(text), plain.encode(text));
  fs::remove(ok);
  std::string fixed = variant("padding", {{"strategy", {{"Fixed", 64}}},
                                          {"direction", "Right"},
                                          {"pad_to_multiple_of", nullptr},
                                          {"pad_id", 0},
                                          {"pad_type_id", 0},
                                          {"pad_token", "<|endoftext|>"}});
  EXPECT_NE(load_error(fixed).find("unsupported padding"), std::string::npos) << load_error(fixed);
  fs::remove(fixed);
  std::string roberta = variant("post_processor", {{"type", "RobertaProcessing"},
                                                   {"sep", {"</s>", 2}},
                                                   {"cls", {"<s>", 0}},
                                                   {"trim_offsets", true},
                                                   {"add_prefix_space", false}});
  EXPECT_EQ(JsonTokenizer(roberta).encode(text), plain.encode(text));
  fs::remove(roberta);
  std::string unknown = variant("post_processor", {{"type", "Whatever"}});
  EXPECT_NE(load_error(unknown).find("post_processor type \"Whatever\""), std::string::npos)
      << load_error(unknown);
  fs::remove(unknown);
  std::string nfd = variant("normalizer", {{"type", "NFD"}});
  EXPECT_NE(load_error(nfd).find("normalizer type \"NFD\""), std::string::npos) << load_error(nfd);
  fs::remove(nfd);
}

// The Oniguruma -> PCRE2 translation keeps Oniguruma's character sets.
TEST(TokenizerJson, RegexTranslation) {
  using tokjson::Regex;
  auto matches = [](const char* pattern, const std::string& text) {
    Regex re(pattern, false, "test");
    std::vector<std::string> out;
    re.for_each_match(text, [&](size_t s, size_t e) { out.push_back(text.substr(s, e - s)); });
    return out;
  };
  // U+180E is not White_Space (Oniguruma) although PCRE2's \s takes it.
  EXPECT_EQ(matches("\\s+", "a \xE1\xA0\x8E b"), (std::vector<std::string>{" ", " "}));
  EXPECT_EQ(matches("\\S+", "a \xE1\xA0\x8E b"),
            (std::vector<std::string>{"a", "\xE1\xA0\x8E", "b"}));
  // U+1C89 (Unicode 16) is a letter for Oniguruma.
  EXPECT_EQ(matches("\\p{L}+", "x\xE1\xB2\x89y 1"), (std::vector<std::string>{"x\xE1\xB2\x89y"}));
  // Ruby syntax: \h is a hex digit, (?m) lets . match \n, ^ and $ are line anchors.
  EXPECT_EQ(matches("\\h+", "xyz09afG"), (std::vector<std::string>{"09af"}));
  EXPECT_EQ(matches("(?m:a.b)", "a\nb"), (std::vector<std::string>{"a\nb"}));
  EXPECT_EQ(matches("^a", "b\na"), (std::vector<std::string>{"a"}));
  // Empty matches as onig's find_iter: none right after a match.
  EXPECT_EQ(matches("x*", "axxb"), (std::vector<std::string>{"", "xx", ""}));
  EXPECT_THROW(Regex("[[:alpha:]]", false, "test"), Error);
  EXPECT_THROW(Regex("[a-z&&[^c]]", false, "test"), Error);
  EXPECT_THROW(Regex("\\w+", false, "test"), Error);
}

}  // namespace
}  // namespace gdn::data
