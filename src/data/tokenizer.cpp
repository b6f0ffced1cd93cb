// Byte and SentencePiece tokenizers. The SentencePiece trainer is fed lines (each with its
// "\n", which is a user-defined symbol), grouped into sentences of at most kSentenceBytes: a
// piece can never span a newline, so encoding line by line equals encoding the whole text and
// keeps libsentencepiece's per-call cost small (one 10 MB string is ~30x slower than its lines).
#include "src/data/tokenizer.h"

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>
#include <type_traits>
#include <unordered_map>

#include "src/core/error.h"
#include "src/data/tokenizer_file.h"
#include "src/io/atomic_file.h"

namespace gdn::data {

namespace {

namespace fs = std::filesystem;
static_assert(std::is_same_v<int32_t, int>, "SentencePiece ids are int");

constexpr size_t kSentenceBytes = 4096;

// Writes `bytes` to dir/name through a temporary file and a rename, so readers never see a
// half-written tokenizer.
std::string save_file(const std::string& dir, const std::string& name, const std::string& bytes) {
  GDN_CHECK(fs::is_directory(dir), "cannot save the tokenizer: '", dir, "' is not a directory");
  const std::string path = (fs::path(dir) / name).string();
  io::write_file_atomic(path, bytes);
  return path;
}

// Calls fn(line) for each line of `text`, the "\n" included (the last may lack one).
template <typename Fn>
void for_each_line(std::string_view text, Fn&& fn) {
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    end = end == std::string_view::npos ? text.size() : end + 1;
    fn(text.substr(pos, end - pos));
    pos = end;
  }
}

// Largest n <= max_len such that text[0, n) ends on a UTF-8 character boundary.
size_t utf8_prefix(std::string_view text, size_t max_len) {
  if (text.size() <= max_len) return text.size();
  size_t n = max_len;
  while (n > 0 && (uint8_t(text[n]) & 0xC0) == 0x80) --n;
  return n > 0 ? n : max_len;
}

class ByteTokenizer final : public Tokenizer {
 public:
  explicit ByteTokenizer(bool with_specials) : specials_(with_specials) {}
  std::string name() const override { return "byte"; }
  int64_t vocab_size() const override { return specials_ ? 258 : 256; }
  int64_t bos_id() const override { return specials_ ? 256 : -1; }
  int64_t eos_id() const override { return specials_ ? 257 : -1; }
  void encode_append(std::string_view text, std::vector<int32_t>& out) const override {
    out.reserve(out.size() + text.size());
    for (char c : text) out.push_back(int32_t(uint8_t(c)));
  }
  std::string decode(const std::vector<int32_t>& ids) const override {
    std::string text;
    text.reserve(ids.size());
    for (size_t i = 0; i < ids.size(); ++i) {
      const int32_t id = ids[i];
      GDN_CHECK(id >= 0 && id < vocab_size(), "byte tokenizer: id ", id, " at position ", i,
                " is outside the vocabulary [0, ", vocab_size(), ")");
      if (id < 256) text.push_back(char(uint8_t(id)));
    }
    return text;
  }
  std::string save(const std::string& dir) const override {
    nlohmann::json j = {{"type", "byte"},
                        {"vocab_size", vocab_size()},
                        {"bos_id", bos_id()},
                        {"eos_id", eos_id()},
                        {"description",
                         "UTF-8 bytes as ids 0..255; bos 256 and eos 257 when "
                         "vocab_size is 258"}};
    return save_file(dir, "tokenizer.json", j.dump(2) + "\n");
  }

 private:
  bool specials_;
};

class SentencePieceTokenizer final : public Tokenizer {
 public:
  // `origin` names the model in error messages.
  SentencePieceTokenizer(const std::string& serialized, const std::string& origin)
      : serialized_(serialized) {
    auto st = sp_.LoadFromSerializedProto(serialized_);
    GDN_CHECK(st.ok(), "cannot load the SentencePiece model ", origin, ": ", st.ToString());
    // Line-by-line encoding equals whole-text encoding when "\n" is a user-defined symbol (as
    // in ours); a foreign model with a "\n" piece still round-trips exactly line by line.
    const int nl = sp_.PieceToId("\n");
    split_lines_ = nl != sp_.unk_id() && !sp_.IsControl(nl) && !sp_.IsByte(nl);
  }
  std::string name() const override { return "sentencepiece"; }
  int64_t vocab_size() const override { return sp_.GetPieceSize(); }
  int64_t bos_id() const override { return sp_.bos_id(); }
  int64_t eos_id() const override { return sp_.eos_id(); }
  void encode_append(std::string_view text, std::vector<int32_t>& out) const override {
    std::vector<int> ids;
    auto encode_part = [&](std::string_view part) {
      auto st = sp_.Encode(part, &ids);
      GDN_CHECK(st.ok(), "SentencePiece encode failed: ", st.ToString());
      out.insert(out.end(), ids.begin(), ids.end());
    };
    if (split_lines_) {
      for_each_line(text, encode_part);
    } else {
      encode_part(text);
    }
  }
  std::string decode(const std::vector<int32_t>& ids) const override {
    const int64_t n = vocab_size();
    for (size_t i = 0; i < ids.size(); ++i)
      GDN_CHECK(ids[i] >= 0 && ids[i] < n, "sentencepiece tokenizer: id ", ids[i], " at position ",
                i, " is outside the vocabulary [0, ", n, ")");
    std::string text;
    auto st = sp_.Decode(ids, &text);
    GDN_CHECK(st.ok(), "SentencePiece decode failed: ", st.ToString());
    return text;
  }
  std::string save(const std::string& dir) const override {
    return save_file(dir, "tokenizer.model", serialized_);
  }

 private:
  std::string serialized_;
  sentencepiece::SentencePieceProcessor sp_;
  bool split_lines_ = false;
};

// Feeds the trainer sentences of whole lines (long lines cut at character boundaries).
class LineIterator final : public sentencepiece::SentenceIterator {
 public:
  explicit LineIterator(const std::vector<std::string>& texts) : texts_(texts) { fill(); }
  bool done() const override { return doc_ >= texts_.size() && current_.empty(); }
  void Next() override {
    current_.clear();
    fill();
  }
  const std::string& value() const override { return current_; }
  sentencepiece::util::Status status() const override { return {}; }

 private:
  // Builds the next sentence into current_ from the remaining text.
  void fill() {
    while (current_.empty() && doc_ < texts_.size()) {
      std::string_view doc = texts_[doc_];
      while (pos_ < doc.size()) {
        std::string_view rest = doc.substr(pos_);
        size_t line = rest.find('\n');
        line = line == std::string_view::npos ? rest.size() : line + 1;
        if (line > kSentenceBytes) {
          if (!current_.empty()) return;  // the long line starts the next sentence
          line = utf8_prefix(rest, kSentenceBytes);
        }
        if (current_.size() + line > kSentenceBytes && !current_.empty()) return;
        current_.append(rest.substr(0, line));
        pos_ += line;
      }
      ++doc_;
      pos_ = 0;
    }
  }
  const std::vector<std::string>& texts_;
  size_t doc_ = 0, pos_ = 0;
  std::string current_;
};

}  // namespace

std::unique_ptr<Tokenizer> make_byte_tokenizer(bool with_specials) {
  return std::make_unique<ByteTokenizer>(with_specials);
}

std::unique_ptr<Tokenizer> train_sentencepiece(const std::vector<std::string>& texts,
                                               const SentencePieceOptions& options) {
  GDN_CHECK(options.model_type == "bpe" || options.model_type == "unigram",
            "sentencepiece model_type must be bpe or unigram, got '", options.model_type, "'");
  // unk, bos, eos and "\n", plus 256 byte pieces with byte fallback.
  const int64_t min_vocab = options.byte_fallback ? 4 + 256 + 8 : 4 + 8;
  GDN_CHECK(
      options.vocab_size >= min_vocab, "sentencepiece vocab_size ", options.vocab_size,
      " is too small (at least ", min_vocab,
      options.byte_fallback ? " with byte fallback; turn byte fallback off for a tiny vocab" : "",
      ")");
  GDN_CHECK(options.vocab_size <= (int64_t(1) << 31) - 1, "sentencepiece vocab_size ",
            options.vocab_size, " does not fit in int32");
  size_t total_bytes = 0;
  for (const auto& t : texts) total_bytes += t.size();
  GDN_CHECK(total_bytes > 0, "cannot train SentencePiece on an empty corpus");
  const int threads = options.num_threads > 0
                          ? options.num_threads
                          : int(std::max(1u, std::thread::hardware_concurrency()));
  std::unordered_map<std::string, std::string> args = {
      {"model_type", options.model_type},
      {"vocab_size", std::to_string(options.vocab_size)},
      // Small corpora may not support the requested size: take what there is.
      {"hard_vocab_limit", "false"},
      // Exact round trips of code and prose: no NFKC, no whitespace folding or dummy prefix.
      {"normalization_rule_name", "identity"},
      {"remove_extra_whitespaces", "false"},
      {"add_dummy_prefix", "false"},
      {"allow_whitespace_only_pieces", "true"},
      {"split_digits", "true"},
      {"user_defined_symbols", "\n"},
      {"byte_fallback", options.byte_fallback ? "true" : "false"},
      {"character_coverage", std::to_string(options.character_coverage)},
      {"max_sentence_length", std::to_string(2 * kSentenceBytes)},
      {"input_sentence_size", "0"},  // callers sample; the trainer takes every sentence
      {"num_threads", std::to_string(threads)},
      {"unk_id", "0"},
      {"bos_id", "1"},
      {"eos_id", "2"},
      {"pad_id", "-1"},
      {"minloglevel", options.quiet ? "1" : "0"},
  };
  LineIterator sentences(texts);
  std::string serialized;
  auto st = sentencepiece::SentencePieceTrainer::Train(args, &sentences, &serialized);
  GDN_CHECK(st.ok(), "SentencePiece training failed (", options.model_type, ", vocab_size ",
            options.vocab_size, ", ", total_bytes, " bytes of text): ", st.ToString());
  return std::make_unique<SentencePieceTokenizer>(serialized, "(just trained)");
}

std::unique_ptr<Tokenizer> load_sentencepiece(const std::string& model_path) {
  std::ifstream f(model_path, std::ios::binary);
  GDN_CHECK(f, "cannot open the SentencePiece model '", model_path, "'");
  std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  return std::make_unique<SentencePieceTokenizer>(bytes, "'" + model_path + "'");
}

std::unique_ptr<Tokenizer> load_tokenizer(const std::string& dir) {
  const fs::path model = fs::path(dir) / "tokenizer.model";
  const fs::path json = fs::path(dir) / "tokenizer.json";
  if (fs::exists(model)) return load_sentencepiece(model.string());
  GDN_CHECK(fs::exists(json), "no tokenizer in '", dir, "': neither ", model.string(), " nor ",
            json.string(), " exists (gdn prepare-data writes one)");
  std::ifstream f(json);
  GDN_CHECK(f, "cannot open '", json.string(), "'");
  nlohmann::json j;
  try {
    f >> j;
  } catch (const std::exception& e) {
    GDN_FAIL(json.string(), ": not valid JSON: ", e.what());
  }
  // Hugging Face's tokenizer.json (a "model" object) or gdn's byte tokenizer ("type": "byte").
  if (j.is_object() && j.contains("model") && !j.contains("type"))
    return open_tokenizer_json(json.string());
  const std::string type = j.value("type", "");
  GDN_CHECK(type == "byte", json.string(), ": unknown tokenizer type '", type,
            "' (expected \"byte\", or a tokenizer.json of Hugging Face's tokenizers library; a ",
            "SentencePiece tokenizer is stored as tokenizer.model)");
  const int64_t vocab = j.value("vocab_size", int64_t(256));
  GDN_CHECK(vocab == 256 || vocab == 258, json.string(), ": byte tokenizer vocab_size must be 256 ",
            "or 258 (with bos/eos), got ", vocab);
  return make_byte_tokenizer(vocab == 258);
}

bool is_valid_utf8(std::string_view text, size_t* bad_offset) {
  const auto* s = reinterpret_cast<const uint8_t*>(text.data());
  const size_t n = text.size();
  size_t i = 0;
  auto fail = [&] {
    if (bad_offset) *bad_offset = i;
    return false;
  };
  while (i < n) {
    const uint8_t c = s[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    int len;
    uint32_t cp;
    if ((c & 0xE0) == 0xC0) {
      len = 2, cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3, cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4, cp = c & 0x07;
    } else {
      return fail();
    }
    if (i + size_t(len) > n) return fail();
    for (int k = 1; k < len; ++k) {
      if ((s[i + k] & 0xC0) != 0x80) return fail();
      cp = (cp << 6) | (s[i + k] & 0x3F);
    }
    static constexpr uint32_t kMinForLen[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMinForLen[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return fail();
    i += size_t(len);
  }
  return true;
}

}  // namespace gdn::data
