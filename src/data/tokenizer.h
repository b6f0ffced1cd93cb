// Tokenizers: text <-> token ids. Two implementations behind one interface:
//   byte          UTF-8 bytes as ids 0..255 (vocab 256). With specials, bos = 256 and
//                 eos = 257 (vocab 258); decode drops them.
//   sentencepiece a BPE or unigram model trained with libsentencepiece on the corpus itself.
//                 Ids: unk = 0, bos = 1, eos = 2, then the pieces. Our models use the identity
//                 normaliser (no whitespace folding, no dummy prefix), "\n" as its own symbol and
//                 byte fallback, so decode(encode(text)) == text for any UTF-8 (code included).
// A tokenizer is saved next to the shards: tokenizer.json (byte) or tokenizer.model
// (sentencepiece); load_tokenizer(dir) finds whichever is there.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace gdn::data {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  virtual std::string name() const = 0;  // "byte" or "sentencepiece"
  virtual int64_t vocab_size() const = 0;
  virtual int64_t bos_id() const { return -1; }  // -1: none
  virtual int64_t eos_id() const { return -1; }  // -1: none
  // Appends the ids of `text` to `out` (no bos/eos added). Thread-safe.
  virtual void encode_append(std::string_view text, std::vector<int32_t>& out) const = 0;
  std::vector<int32_t> encode(std::string_view text) const {
    std::vector<int32_t> ids;
    encode_append(text, ids);
    return ids;
  }
  // Throws on an id outside [0, vocab_size).
  virtual std::string decode(const std::vector<int32_t>& ids) const = 0;
  // Writes the tokenizer into `dir` (which must exist); returns the file written.
  virtual std::string save(const std::string& dir) const = 0;
};

std::unique_ptr<Tokenizer> make_byte_tokenizer(bool with_specials = false);

struct SentencePieceOptions {
  int64_t vocab_size = 8192;
  std::string model_type = "bpe";  // "bpe" or "unigram"
  bool byte_fallback = true;       // unseen characters become <0xNN> byte pieces
  double character_coverage = 0.9995;
  int num_threads = 0;  // 0: all hardware threads
  bool quiet = true;    // hide libsentencepiece's INFO log
};

// Trains on `texts` (each a document; split into lines internally, so pieces never cross
// "\n"). The model's vocabulary may come out smaller than asked on a tiny corpus.
std::unique_ptr<Tokenizer> train_sentencepiece(const std::vector<std::string>& texts,
                                               const SentencePieceOptions& options);
// Loads a .model file (ours or any other SentencePiece model).
std::unique_ptr<Tokenizer> load_sentencepiece(const std::string& model_path);

// Loads DIR/tokenizer.model or DIR/tokenizer.json; a clear error when neither exists.
std::unique_ptr<Tokenizer> load_tokenizer(const std::string& dir);

// True when `text` is well-formed UTF-8 (no overlongs, surrogates or code points > U+10FFFF).
// On failure `bad_offset` (when given) receives the offset of the first bad byte.
bool is_valid_utf8(std::string_view text, size_t* bad_offset = nullptr);

}  // namespace gdn::data
