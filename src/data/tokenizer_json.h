// Hugging Face tokenizer.json files (the Rust `tokenizers` library's format), BPE model only,
// encoded and decoded to the library's exact ids and text:
//   ids  == Tokenizer.from_file(PATH).encode(text, add_special_tokens=False).ids
//   text == decode(ids, skip_special_tokens=False)
// Supported: normalizers NFC, NFKC, Lowercase, Prepend, Replace, Sequence; pre-tokenizers
// ByteLevel, Split, Metaspace, Digits, Sequence; model BPE (dropout null); decoders ByteLevel,
// Metaspace, Replace, ByteFallback, Fuse, Strip, Sequence; post-processors TemplateProcessing,
// ByteLevel, RobertaProcessing, BertProcessing, Sequence (accepted and not applied: they add
// nothing without special tokens). That covers GPT-2, Llama 3, Qwen2/3 and Llama 2 / Mistral /
// TinyLlama. Anything else is refused when the file is loaded, naming the component and the
// file; so is a truncation section (the library would cut every encoding) and a padding section
// other than BatchLongest without pad_to_multiple_of (the only one that leaves a single
// encoding unchanged).
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "src/data/tokenizer.h"

namespace gdn::data {

class JsonTokenizer : public Tokenizer {
 public:
  // An entry of the file's "added_tokens", with the id the library gives it (the content's id
  // in the model vocabulary if there, else the next free id, in file order).
  struct AddedToken {
    int32_t id = -1;
    std::string content;
    bool single_word = false, lstrip = false, rstrip = false, normalized = true, special = false;
  };

  // Loads PATH; throws gdn::Error naming the file and what is unsupported or malformed.
  explicit JsonTokenizer(const std::string& path);
  ~JsonTokenizer() override;

  std::string name() const override { return "tokenizer.json"; }
  int64_t vocab_size() const override;  // max id + 1 over the model vocab and added tokens
  void encode_append(std::string_view text, std::vector<int32_t>& out) const override;
  // Ids with no token inside [0, vocab_size) are skipped, as the library skips them.
  std::string decode(const std::vector<int32_t>& ids) const override;
  // Writes the loaded file's bytes to DIR/tokenizer.json (temporary name, then rename).
  std::string save(const std::string& dir) const override;

  const std::vector<AddedToken>& added_tokens() const;
  // The library's token_to_id / id_to_token (an added token reads as its content, or as its
  // normalized form when it is matched normalized).
  std::optional<int32_t> token_to_id(std::string_view token) const;
  std::string id_to_token(int32_t id) const;  // "" when the id has no token
  const std::string& file_bytes() const;
  const std::string& path() const;
  // out[i] = encode(docs[i]) using `threads` threads (<= 0: all hardware threads).
  void encode_batch(const std::vector<std::string_view>& docs,
                    std::vector<std::vector<int32_t>>& out, int threads) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Loads PATH (a tokenizer.json file). Throws gdn::Error naming the file and what is unsupported.
std::unique_ptr<Tokenizer> load_tokenizer_json(const std::string& path);

}  // namespace gdn::data
