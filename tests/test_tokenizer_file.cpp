// Tokenizers given as files (src/data/tokenizer_file.h, tokenize_file.h): bos and eos chosen from
// a tokenizer.json's added tokens, prepare-data with a tokenizer.json (the file kept byte for
// byte, its hash checked on open), checkpoint files that load back to the same tokenizer, and
// `gdn tokenize`'s JSON Lines in and out. The fixtures are tokenizer.json files that the
// `tokenizers` library wrote (tests/data/tokenizers, scripts/make_tokenizer_fixtures.py).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>

#include "src/data/hf_tokenizer.h"
#include "src/data/meta.h"
#include "src/data/prepare.h"
#include "src/data/tokenize_file.h"
#include "src/data/tokenizer_file.h"
#include "src/io/content_hash.h"
#include "tests/test_helpers.h"

namespace gdn::data {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using test::error_of;
using test::read_file;
using test::TempDir;
using test::write_file;

std::string fixture(const std::string& family) {
  const char* d = std::getenv("GDN_TEST_DATA");
  return std::string(d ? d : "tests/data") + "/tokenizers/" + family + "/tokenizer.json";
}

bool has(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

TEST(TokenizerFile, BosAndEosAreTheKnownSpecialTokensOfEachFamily) {
  struct Want {
    const char* family;
    int64_t bos, eos;
  };
  for (const Want& w : {Want{"gpt2", -1, 0}, Want{"llama2", 1, 2}, Want{"llama3", 0, 1},
                        Want{"qwen", -1, 0}, Want{"mistral", 1, 2}}) {
    const auto tok = open_named_tokenizer(fixture(w.family));
    EXPECT_EQ(tok->name(), kHuggingFaceTokenizer) << w.family;
    EXPECT_EQ(tok->bos_id(), w.bos) << w.family;
    EXPECT_EQ(tok->eos_id(), w.eos) << w.family;
  }
}

TEST(TokenizerFile, AskedTokensAndTheConfigBesideTheFileWin) {
  const auto asked = open_named_tokenizer(fixture("llama3"), {"", "<|eot_id|>"});
  EXPECT_EQ(asked->eos_id(), 4);
  TempDir dir;
  fs::copy_file(fixture("llama3"), dir.file("tokenizer.json"));
  write_file(dir.file("tokenizer_config.json"),
             R"({"bos_token": {"content": "<|begin_of_text|>"}, "eos_token": "<|eot_id|>"})");
  const auto from_dir = open_named_tokenizer(dir.path.string());  // a model directory
  EXPECT_EQ(from_dir->bos_id(), 0);
  EXPECT_EQ(from_dir->eos_id(), 4);
  const std::string e = error_of([&] { open_named_tokenizer(fixture("qwen"), {"", "<|nope|>"}); });
  EXPECT_TRUE(has(e, "--eos names '<|nope|>' as the eos_token, which is not one of its added"))
      << e;
}

TEST(TokenizerFile, SeveralCandidatesAskForAChoice) {
  TempDir dir;
  json j = json::parse(read_file(fixture("qwen")));
  j["added_tokens"].push_back({{"id", 1102},
                               {"content", "</s>"},
                               {"single_word", false},
                               {"lstrip", false},
                               {"rstrip", false},
                               {"normalized", false},
                               {"special", true}});
  write_file(dir.file("tokenizer.json"), j.dump());
  const std::string e = error_of([&] { open_named_tokenizer(dir.file("tokenizer.json")); });
  EXPECT_TRUE(has(e,
                  "the special tokens </s>, <|endoftext|> could each be the eos_token: "
                  "choose one with --eos TOKEN"))
      << e;
  EXPECT_EQ(open_named_tokenizer(dir.file("tokenizer.json"), {"", "</s>"})->eos_id(), 1102);
}

TEST(TokenizerFile, NamesThatAreNotTokenizersAreRefused) {
  TempDir dir;
  std::string e = error_of([&] { open_named_tokenizer(dir.file("missing.json")); });
  EXPECT_TRUE(has(e, "no such file or directory")) << e;
  e = error_of([&] { open_named_tokenizer(dir.path.string()); });
  EXPECT_TRUE(has(e, "holds neither tokenizer.json nor tokenizer.model")) << e;
  e = error_of([&] { open_named_tokenizer("sentencepiece"); });
  EXPECT_TRUE(has(e, "trained by gdn prepare-data")) << e;
  EXPECT_EQ(open_named_tokenizer("byte")->name(), "byte");
}

PrepareOptions prepare_with(const TempDir& dir, const std::string& tokenizer) {
  write_file(dir.file("a.txt"), "Hello world! The quick brown fox, 1234.\n");
  write_file(dir.file("b.txt"), "Zürich café 日本語 🙂 DON'T <|endoftext|> stop\n");
  PrepareOptions o;
  o.inputs = {dir.file("a.txt"), dir.file("b.txt")};
  o.out_dir = dir.file("data");
  o.tokenizer = tokenizer;
  o.progress = false;
  o.threads = 2;
  o.val_fraction = 0;
  return o;
}

TEST(TokenizerFile, PrepareKeepsTheFileAndItsHashAndAppendsItsEos) {
  TempDir dir;
  const PrepareSummary s = prepare_data(prepare_with(dir, fixture("gpt2")));
  EXPECT_EQ(s.tokenizer, kHuggingFaceTokenizer);
  EXPECT_EQ(read_file(dir.file("data") + "/tokenizer.json"), read_file(fixture("gpt2")));
  const json meta = json::parse(read_file(dir.file("data") + "/meta.json"));
  EXPECT_EQ(meta["tokenizer"], kHuggingFaceTokenizer);
  EXPECT_EQ(meta["tokenizer_file"], "tokenizer.json");
  EXPECT_EQ(meta["tokenizer_source"], fixture("gpt2"));
  EXPECT_EQ(meta["tokenizer_hash"], io::content_hash({fixture("gpt2")}));
  EXPECT_EQ(meta["eos_id"], 0);
  const json config = json::parse(read_file(dir.file("data") + "/tokenizer_config.json"));
  EXPECT_EQ(config["eos_token"], "<|endoftext|>");

  // The shards hold each document's ids and the eos, in the file's ids.
  const PreparedData p = open_prepared(dir.file("data"));
  const auto tok = open_named_tokenizer(fixture("gpt2"));
  auto ids_of = [&](const char* file) {
    std::vector<int32_t> ids = tok->encode(read_file(dir.file(file)));
    ids.push_back(0);
    return ids;
  };
  const std::vector<int32_t> a = ids_of("a.txt"), b = ids_of("b.txt");
  // Documents go in split order (by a hash of their names): either order is right.
  std::vector<int32_t> want = a, swapped = b;
  want.insert(want.end(), b.begin(), b.end());
  swapped.insert(swapped.end(), a.begin(), a.end());
  ASSERT_EQ(p.train->size(), int64_t(want.size()));
  const std::vector<int32_t> got = p.train->read(0, p.train->size());
  EXPECT_TRUE(got == want || got == swapped);

  // An edited tokenizer file no longer matches the shards: named by its hash.
  write_file(dir.file("data") + "/tokenizer.json", read_file(fixture("gpt2")) + " ");
  const std::string e = error_of([&] { open_prepared(dir.file("data")); });
  EXPECT_TRUE(has(e, "field \"tokenizer_hash\"")) << e;
}

TEST(TokenizerFile, CheckpointFilesLoadBackAsTheSameTokenizer) {
  TempDir dir;
  prepare_data(prepare_with(dir, fixture("llama2")));
  fs::create_directories(dir.file("ckpt"));
  write_file(dir.file("ckpt") + "/config.json", R"({"model_type": "gated_deltanet"})");
  const auto data_tok = load_hf_tokenizer(dir.file("data"));
  write_hf_tokenizer_files(dir.file("ckpt"), *data_tok);
  EXPECT_EQ(read_file(dir.file("ckpt") + "/tokenizer.json"), read_file(fixture("llama2")));
  const json config = json::parse(read_file(dir.file("ckpt") + "/config.json"));
  EXPECT_EQ(config["bos_token_id"], 1);
  EXPECT_EQ(config["eos_token_id"], 2);
  const json tc = json::parse(read_file(dir.file("ckpt") + "/tokenizer_config.json"));
  EXPECT_EQ(tc["tokenizer_class"], "PreTrainedTokenizerFast");
  EXPECT_EQ(tc["bos_token"], "<s>");
  EXPECT_EQ(tc["added_tokens_decoder"]["1201"]["content"], "[INST]");
  const auto back = load_hf_tokenizer(dir.file("ckpt"));
  EXPECT_EQ(back->name(), kHuggingFaceTokenizer);
  EXPECT_EQ(back->bos_id(), 1);
  EXPECT_EQ(back->eos_id(), 2);
  const std::string text = "Hello world [INST] café 🙂";
  EXPECT_EQ(back->encode(text), data_tok->encode(text));
}

TEST(TokenizeFile, LineForLineThroughEncodeAndDecode) {
  TempDir dir;
  const auto tok = open_named_tokenizer(fixture("qwen"));
  const std::vector<std::string> texts = {"Hello world", "", "naïve <|im_start|> 日本語\n\tx"};
  std::string in;
  for (const auto& t : texts) in += t.empty() ? "\n" : json({{"text", t}, {"id", 3}}).dump() + "\n";
  write_file(dir.file("in.jsonl"), in);
  TokenizeFileOptions o;
  o.input = dir.file("in.jsonl");
  o.out = dir.file("ids.jsonl");
  o.threads = 2;
  const TokenizeFileSummary s = tokenize_jsonl(*tok, o);
  EXPECT_EQ(s.lines, 3);
  std::istringstream lines(read_file(dir.file("ids.jsonl")));
  std::string line;
  for (const auto& t : texts) {
    ASSERT_TRUE(std::getline(lines, line));
    if (t.empty()) {
      EXPECT_EQ(line, "");
      continue;
    }
    EXPECT_EQ(json::parse(line)["ids"].get<std::vector<int32_t>>(), tok->encode(t));
  }
  o.decode = true;
  o.input = dir.file("ids.jsonl");
  o.out = dir.file("text.jsonl");
  tokenize_jsonl(*tok, o);
  std::istringstream decoded(read_file(dir.file("text.jsonl")));
  for (const auto& t : texts) {
    ASSERT_TRUE(std::getline(decoded, line));
    if (!t.empty()) {
      EXPECT_EQ(json::parse(line)["text"], t);
    }
  }
}

TEST(TokenizeFile, ABadLineIsNamedAndLeavesNoOutput) {
  TempDir dir;
  const auto tok = open_named_tokenizer(fixture("gpt2"));
  write_file(dir.file("in.jsonl"), "{\"text\": \"ok\"}\n{\"body\": \"x\"}\n");
  TokenizeFileOptions o;
  o.input = dir.file("in.jsonl");
  o.out = dir.file("out.jsonl");
  std::string e = error_of([&] { tokenize_jsonl(*tok, o); });
  EXPECT_TRUE(has(e, "in.jsonl line 2: no string field \"text\" (--text-field)")) << e;
  EXPECT_FALSE(fs::exists(o.out));
  write_file(dir.file("ids.jsonl"), "{\"ids\": [1, 2]}\n{\"ids\": [5, 99999]}\n");
  o.input = dir.file("ids.jsonl");
  o.decode = true;
  e = error_of([&] { tokenize_jsonl(*tok, o); });
  EXPECT_TRUE(has(e, "ids.jsonl line 2: id 99999 is not in [0, 1002)")) << e;
}

}  // namespace
}  // namespace gdn::data
