// Tokenizers named by the user (tokenizer_file.h).
#include "src/data/tokenizer_file.h"

#include <cstdio>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <vector>

#include "src/core/error.h"
#include "src/data/hf_tokenizer.h"
#include "src/data/tokenizer_json.h"
#include "src/io/atomic_file.h"

namespace gdn::data {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// The known names of each role, in the order the families use them.
const std::vector<std::string> kBosNames = {"<s>", "<|begin_of_text|>", "<bos>", "<|bos|>"};
const std::vector<std::string> kEosNames = {"</s>", "<|endoftext|>", "<|end_of_text|>", "<eos>",
                                            "<|eos|>"};

using AddedToken = JsonTokenizer::AddedToken;
using AddedByContent = std::map<std::string, AddedToken>;

// The added token as tokenizer_config.json's added_tokens_decoder lists it.
json decoder_entry(const AddedToken& t) {
  return {{"content", t.content}, {"single_word", t.single_word}, {"lstrip", t.lstrip},
          {"rstrip", t.rstrip},   {"normalized", t.normalized},   {"special", t.special}};
}

// A tokenizer.json's encoder with the bos and eos training uses.
class HuggingFaceTokenizer : public Tokenizer {
 public:
  HuggingFaceTokenizer(std::unique_ptr<JsonTokenizer> encoder, AddedByContent added,
                       std::string bos, std::string eos)
      : encoder_(std::move(encoder)),
        added_(std::move(added)),
        bos_(std::move(bos)),
        eos_(std::move(eos)) {}

  std::string name() const override { return kHuggingFaceTokenizer; }
  int64_t vocab_size() const override { return encoder_->vocab_size(); }
  int64_t bos_id() const override { return id_of(bos_); }
  int64_t eos_id() const override { return id_of(eos_); }
  void encode_append(std::string_view text, std::vector<int32_t>& out) const override {
    encoder_->encode_append(text, out);
  }
  std::string decode(const std::vector<int32_t>& ids) const override {
    return encoder_->decode(ids);
  }

  // tokenizer.json as it was, tokenizer_config.json (AutoTokenizer's fast tokenizer over it, with
  // bos/eos named and no tokens added by encode) and special_tokens_map.json.
  std::string save(const std::string& dir) const override {
    const std::string path = encoder_->save(dir);
    json config = {{"tokenizer_class", "PreTrainedTokenizerFast"},
                   {"add_bos_token", false},
                   {"add_eos_token", false},
                   {"clean_up_tokenization_spaces", false},
                   {"bos_token", nullptr},
                   {"eos_token", nullptr}};
    json map = json::object();
    if (!bos_.empty()) config["bos_token"] = map["bos_token"] = bos_;
    if (!eos_.empty()) config["eos_token"] = map["eos_token"] = eos_;
    json decoder = json::object();
    for (const AddedToken& t : encoder_->added_tokens())
      decoder[std::to_string(t.id)] = decoder_entry(t);
    config["added_tokens_decoder"] = decoder;
    io::write_file_atomic((fs::path(dir) / "tokenizer_config.json").string(),
                          config.dump(2) + "\n");
    io::write_file_atomic((fs::path(dir) / "special_tokens_map.json").string(), map.dump(2) + "\n");
    return path;
  }

 private:
  int64_t id_of(const std::string& token) const { return token.empty() ? -1 : added_.at(token).id; }

  std::unique_ptr<JsonTokenizer> encoder_;
  AddedByContent added_;
  std::string bos_, eos_;  // token texts ("": none)
};

// tokenizer_config.json's bos_token or eos_token: a string, {"content": ...} or null.
std::string config_token(const json& config, const char* role) {
  if (!config.contains(role)) return "";
  const json& v = config[role];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string())
    return v["content"].get<std::string>();
  return "";
}

// The one special added token with a known name for the role, "" when none; several are an error
// naming them and the flag that picks one.
std::string known_token(const AddedByContent& added, const std::vector<std::string>& names,
                        const char* role, const char* flag, const std::string& path) {
  std::vector<std::string> found;
  for (const std::string& n : names) {
    const auto it = added.find(n);
    if (it != added.end() && it->second.special) found.push_back(n);
  }
  GDN_CHECK(found.size() <= 1, path, ": the special tokens ", join(found, ", "),
            " could each be the ", role, ": choose one with ", flag, " TOKEN");
  return found.empty() ? "" : found[0];
}

// The role's token: asked for (it must be an added token of the file), else the directory's
// tokenizer_config.json, else a known name.
std::string choose_token(const std::string& asked, const json& dir_config,
                         const AddedByContent& added, const std::vector<std::string>& names,
                         const char* role, const char* flag, const std::string& path) {
  std::string token = asked;
  const char* from = flag;
  if (token.empty()) {
    token = config_token(dir_config, role);
    from = "tokenizer_config.json";
  }
  if (token.empty()) return known_token(added, names, role, flag, path);
  GDN_CHECK(added.count(token), path, ": ", from, " names '", token, "' as the ", role,
            ", which is not one of its added tokens");
  return token;
}

}  // namespace

std::unique_ptr<Tokenizer> open_tokenizer_json(const std::string& path,
                                               const SpecialTokens& specials) {
  auto encoder = std::make_unique<JsonTokenizer>(path);
  AddedByContent added;
  for (const AddedToken& t : encoder->added_tokens()) added[t.content] = t;
  json dir_config = json::object();
  const fs::path config_path = fs::path(path).parent_path() / "tokenizer_config.json";
  if (fs::is_regular_file(config_path)) {
    dir_config = json::parse(io::read_regular_file(config_path.string()), nullptr, false);
    GDN_CHECK(dir_config.is_object(), config_path.string(), ": not a JSON object");
  }
  const std::string bos =
      choose_token(specials.bos, dir_config, added, kBosNames, "bos_token", "--bos", path);
  const std::string eos =
      choose_token(specials.eos, dir_config, added, kEosNames, "eos_token", "--eos", path);
  return std::make_unique<HuggingFaceTokenizer>(std::move(encoder), std::move(added), bos, eos);
}

bool names_a_file(const std::string& name) {
  return name != "byte" && name != "sentencepiece";
}

std::unique_ptr<Tokenizer> open_named_tokenizer(const std::string& name,
                                                const SpecialTokens& specials) {
  if (name == "byte") return make_byte_tokenizer(false);
  GDN_CHECK(name != "sentencepiece", "tokenizer 'sentencepiece' is trained by gdn prepare-data; ",
            "here give the path of its tokenizer.model or of the data directory");
  const fs::path p(name);
  GDN_CHECK(fs::exists(p), "tokenizer '", name, "': no such file or directory (expected byte, ",
            "a tokenizer.json, a tokenizer.model, or a directory holding one)");
  if (fs::is_directory(p)) {
    // A model directory: gdn's own tokenizer files read back as what they were (byte,
    // SentencePiece), any other tokenizer.json through the reader with its config's bos/eos.
    GDN_CHECK(fs::exists(p / "tokenizer.json") || fs::exists(p / "tokenizer.model"), "tokenizer '",
              name, "': the directory holds neither tokenizer.json nor tokenizer.model");
    if (specials.bos.empty() && specials.eos.empty()) return load_hf_tokenizer(name);
    if (fs::exists(p / "tokenizer.json")) {
      // gdn's own byte tokenizer.json ({"type": "byte"}) or Hugging Face's.
      const json j =
          json::parse(io::read_regular_file((p / "tokenizer.json").string()), nullptr, false);
      if (j.is_object() && j.contains("type") && !j.contains("model")) return load_tokenizer(name);
      return open_tokenizer_json((p / "tokenizer.json").string(), specials);
    }
    GDN_CHECK(fs::exists(p / "tokenizer.model"), "tokenizer '", name,
              "': the directory holds neither tokenizer.json nor tokenizer.model");
    return load_sentencepiece((p / "tokenizer.model").string());
  }
  if (p.extension() == ".model") return load_sentencepiece(name);
  return open_tokenizer_json(name, specials);
}

}  // namespace gdn::data
