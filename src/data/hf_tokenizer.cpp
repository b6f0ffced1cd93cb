// Hugging Face tokenizer files: writing them for gdn's tokenizers, reading them back.
#include "src/data/hf_tokenizer.h"

#include <sentencepiece_processor.h>

#include <filesystem>
#include <fstream>

#include "src/core/error.h"
#include "src/data/tokenizer_file.h"
#include "src/io/atomic_file.h"

namespace gdn::data {

namespace {

namespace fs = std::filesystem;

constexpr const char* kBosToken = "<|bos|>";
constexpr const char* kEosToken = "<|eos|>";

// Writes `text` to dir/name through a temporary file and a rename: readers never see half a file.
std::string write_atomic(const fs::path& dir, const std::string& name, const std::string& text) {
  const std::string path = (dir / name).string();
  io::write_file_atomic(path, text);
  return path;
}

nlohmann::json read_json(const fs::path& path) {
  std::ifstream f(path);
  GDN_CHECK(f, "cannot open '", path.string(), "'");
  try {
    return nlohmann::json::parse(f);
  } catch (const nlohmann::json::exception& e) {
    GDN_FAIL(path.string(), ": not valid JSON: ", e.what());
  }
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out.push_back(char(cp));
  } else if (cp < 0x800) {
    out.push_back(char(0xC0 | (cp >> 6)));
    out.push_back(char(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(char(0xE0 | (cp >> 12)));
    out.push_back(char(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(char(0x80 | (cp & 0x3F)));
  }
}

nlohmann::json added_token(int64_t id, const std::string& content) {
  return {{"id", id},        {"content", content},  {"single_word", false}, {"lstrip", false},
          {"rstrip", false}, {"normalized", false}, {"special", true}};
}

// The special tokens of `tok` by role ("bos_token", ...) with their ids and texts.
struct Special {
  const char* role;
  int64_t id;
  std::string content;
};

std::vector<Special> specials_of(const Tokenizer& tok, const fs::path& dir) {
  std::vector<Special> out;
  if (tok.name() == "byte") {
    if (tok.bos_id() >= 0) out.push_back({"bos_token", tok.bos_id(), kBosToken});
    if (tok.eos_id() >= 0) out.push_back({"eos_token", tok.eos_id(), kEosToken});
    return out;
  }
  // SentencePiece: the pieces of the model just written (ours are <unk>, <s>, </s>).
  sentencepiece::SentencePieceProcessor sp;
  const fs::path model = dir / "tokenizer.model";
  const auto st = sp.Load(model.string());
  GDN_CHECK(st.ok(), "cannot load '", model.string(), "': ", st.ToString());
  if (sp.unk_id() >= 0) out.push_back({"unk_token", sp.unk_id(), sp.IdToPiece(sp.unk_id())});
  if (sp.bos_id() >= 0) out.push_back({"bos_token", sp.bos_id(), sp.IdToPiece(sp.bos_id())});
  if (sp.eos_id() >= 0) out.push_back({"eos_token", sp.eos_id(), sp.IdToPiece(sp.eos_id())});
  if (sp.pad_id() >= 0) out.push_back({"pad_token", sp.pad_id(), sp.IdToPiece(sp.pad_id())});
  return out;
}

// gdn's byte tokenizer as write_hf_tokenizer_files writes it: a BPE model over the 256
// byte-level symbols (byte b is id b) without merges, a ByteLevel pre-tokenizer, no normalizer,
// and no added tokens or bos 256 and eos 257. Any other tokenizer.json is read by
// tokenizer_json.h. `specials` receives whether bos/eos are there.
bool is_byte_tokenizer_hf_json(const nlohmann::json& j, bool* specials) {
  if (!j.contains("model") || !j["model"].is_object()) return false;
  const nlohmann::json& m = j["model"];
  if (m.value("type", "") != "BPE" || !m.contains("merges") || !m["merges"].is_array() ||
      !m["merges"].empty() || !m.contains("vocab") || !m["vocab"].is_object() ||
      m["vocab"].size() != 256 || !j.value("normalizer", nlohmann::json()).is_null())
    return false;
  for (int b = 0; b < 256; ++b) {
    const auto it = m["vocab"].find(byte_level_symbol(uint8_t(b)));
    if (it == m["vocab"].end() || *it != b) return false;
  }
  const nlohmann::json pre = j.value("pre_tokenizer", nlohmann::json());
  if (!pre.is_object() || pre.value("type", "") != "ByteLevel") return false;
  std::vector<int64_t> ids;
  for (const auto& t : j.value("added_tokens", nlohmann::json::array()))
    ids.push_back(t.value("id", int64_t(-1)));
  *specials = ids == std::vector<int64_t>{256, 257};
  return ids.empty() || *specials;
}

}  // namespace

void set_config_token_ids(const std::string& dir, int64_t bos_id, int64_t eos_id) {
  const fs::path path = fs::path(dir) / "config.json";
  if (!fs::exists(path)) return;
  nlohmann::json cfg = read_json(path);
  auto id = [](int64_t v) { return v >= 0 ? nlohmann::json(v) : nlohmann::json(nullptr); };
  cfg["bos_token_id"] = id(bos_id);
  cfg["eos_token_id"] = id(eos_id);
  write_atomic(dir, "config.json", cfg.dump(2) + "\n");
}

std::string byte_level_symbol(uint8_t b) {
  // Printable bytes '!'..'~', 0xA1..0xAC and 0xAE..0xFF are their own code points; the other 68
  // take 256, 257, ... in byte order.
  auto printable = [](int c) {
    return (c >= '!' && c <= '~') || (c >= 0xA1 && c <= 0xAC) || (c >= 0xAE && c <= 0xFF);
  };
  uint32_t cp = b;
  if (!printable(b)) {
    int n = 0;
    for (int c = 0; c < b; ++c) n += !printable(c);
    cp = 256 + uint32_t(n);
  }
  std::string s;
  append_utf8(s, cp);
  return s;
}

nlohmann::json byte_tokenizer_hf_json(bool with_specials) {
  nlohmann::json vocab = nlohmann::json::object();
  for (int b = 0; b < 256; ++b) vocab[byte_level_symbol(uint8_t(b))] = b;
  nlohmann::json added = nlohmann::json::array();
  if (with_specials) {
    added.push_back(added_token(256, kBosToken));
    added.push_back(added_token(257, kEosToken));
  }
  // No regex split: every byte is its own token anyway, and splitting never changes the ids.
  const nlohmann::json byte_level = {{"type", "ByteLevel"},
                                     {"add_prefix_space", false},
                                     {"trim_offsets", false},
                                     {"use_regex", false}};
  return {{"version", "1.0"},
          {"truncation", nullptr},
          {"padding", nullptr},
          {"added_tokens", added},
          {"normalizer", nullptr},
          {"pre_tokenizer", byte_level},
          {"post_processor", nullptr},
          {"decoder", byte_level},
          {"model",
           {{"type", "BPE"},
            {"dropout", nullptr},
            {"unk_token", nullptr},
            {"continuing_subword_prefix", nullptr},
            {"end_of_word_suffix", nullptr},
            {"fuse_unk", false},
            {"byte_fallback", false},
            {"ignore_merges", false},
            {"vocab", vocab},
            {"merges", nlohmann::json::array()}}}};
}

std::vector<std::string> write_hf_tokenizer_files(const std::string& dir_in, const Tokenizer& tok) {
  const fs::path dir(dir_in);
  GDN_CHECK(fs::is_directory(dir), "cannot write the tokenizer: '", dir_in, "' is not a directory");
  std::vector<std::string> written;
  if (tok.name() == kHuggingFaceTokenizer) {  // its file as it was, and its config
    written.push_back(tok.save(dir.string()));
    written.push_back((dir / "tokenizer_config.json").string());
    written.push_back((dir / "special_tokens_map.json").string());
    set_config_token_ids(dir.string(), tok.bos_id(), tok.eos_id());
    return written;
  }
  nlohmann::json config;
  if (tok.name() == "byte") {
    const bool with_specials = tok.vocab_size() == 258;
    GDN_CHECK(tok.vocab_size() == 256 || with_specials, "byte tokenizer with vocab_size ",
              tok.vocab_size(), " (expected 256 or 258)");
    written.push_back(
        write_atomic(dir, "tokenizer.json", byte_tokenizer_hf_json(with_specials).dump(2) + "\n"));
    config["tokenizer_class"] = "PreTrainedTokenizerFast";
  } else {
    GDN_CHECK(tok.name() == "sentencepiece", "no Hugging Face form for the '", tok.name(),
              "' tokenizer");
    written.push_back(tok.save(dir.string()));
    // The slow Llama tokenizer with legacy behaviour encodes with the model's own normaliser
    // (ours: identity, no dummy prefix), which is what gdn trained on.
    config["tokenizer_class"] = "LlamaTokenizer";
    config["legacy"] = true;
    config["add_prefix_space"] = false;
    config["sp_model_kwargs"] = nlohmann::json::object();
  }
  // gdn's encode adds no bos/eos, and decode must return the text as it was.
  config["add_bos_token"] = false;
  config["add_eos_token"] = false;
  config["clean_up_tokenization_spaces"] = false;
  nlohmann::json map = nlohmann::json::object();
  nlohmann::json decoder = nlohmann::json::object();
  for (const char* role : {"bos_token", "eos_token", "unk_token", "pad_token"})
    config[role] = nullptr;
  for (const Special& s : specials_of(tok, dir)) {
    config[s.role] = s.content;
    map[s.role] = s.content;
    nlohmann::json t = added_token(s.id, s.content);
    t.erase("id");
    decoder[std::to_string(s.id)] = t;
  }
  config["added_tokens_decoder"] = decoder;
  written.push_back(write_atomic(dir, "tokenizer_config.json", config.dump(2) + "\n"));
  written.push_back(write_atomic(dir, "special_tokens_map.json", map.dump(2) + "\n"));
  set_config_token_ids(dir.string(), tok.bos_id(), tok.eos_id());
  return written;
}

bool has_tokenizer_files(const std::string& dir) {
  return fs::exists(fs::path(dir) / "tokenizer.model") ||
         fs::exists(fs::path(dir) / "tokenizer.json");
}

std::unique_ptr<Tokenizer> load_hf_tokenizer(const std::string& dir) {
  const fs::path model = fs::path(dir) / "tokenizer.model";
  const fs::path json = fs::path(dir) / "tokenizer.json";
  if (fs::exists(model) || !fs::exists(json)) return load_tokenizer(dir);  // names what is missing
  const nlohmann::json j = read_json(json);
  if (j.contains("type")) return load_tokenizer(dir);  // gdn's own byte tokenizer.json
  bool specials = false;
  if (is_byte_tokenizer_hf_json(j, &specials)) return make_byte_tokenizer(specials);
  return open_tokenizer_json(json.string());
}

}  // namespace gdn::data
