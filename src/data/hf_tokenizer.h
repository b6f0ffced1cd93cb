// The tokenizer of a model directory in Hugging Face's form, so that AutoTokenizer loads the
// ids gdn trained on, and gdn finds the tokenizer of a checkpoint without the run's data:
//   byte           tokenizer.json for the `tokenizers` library: a BPE model over the 256
//                  byte-level symbols (GPT-2's byte-to-unicode alphabet) with no merges and a
//                  ByteLevel pre-tokenizer and decoder, so id = byte value; with specials,
//                  <|bos|> = 256 and <|eos|> = 257 as added special tokens.
//   sentencepiece  tokenizer.model (the SentencePiece model itself).
//   huggingface    a tokenizer.json gdn was given (src/data/tokenizer_file.h), as it was.
// Each with tokenizer_config.json and special_tokens_map.json; config.json's bos_token_id and
// eos_token_id are set to the tokenizer's (null where it has none).
#pragma once
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "src/data/tokenizer.h"

namespace gdn::data {

// Writes the tokenizer files into `dir` (which must exist), each through a temporary name and a
// rename, and sets bos_token_id / eos_token_id of DIR/config.json when that file exists.
// Returns the paths written.
std::vector<std::string> write_hf_tokenizer_files(const std::string& dir, const Tokenizer& tok);

// Sets bos_token_id / eos_token_id of DIR/config.json (-1: null), keeping the rest of the file;
// nothing when the file does not exist.
void set_config_token_ids(const std::string& dir, int64_t bos_id, int64_t eos_id);

// The tokenizer.json of the byte tokenizer (vocab 256, or 258 with bos 256 and eos 257).
nlohmann::json byte_tokenizer_hf_json(bool with_specials);
// The byte-level symbol of byte b (GPT-2's bytes_to_unicode: printable Latin-1 bytes stand for
// themselves, the others for U+0100 onwards in byte order), as UTF-8.
std::string byte_level_symbol(uint8_t b);

// Whether `dir` holds a tokenizer: tokenizer.model or tokenizer.json.
bool has_tokenizer_files(const std::string& dir);
// The tokenizer of a model or data directory: tokenizer.model (SentencePiece), tokenizer.json in
// Hugging Face's form (the byte tokenizer as written above, else any tokenizer.json through the
// reader of src/data/tokenizer_json.h, its bos/eos from tokenizer_config.json beside it) or gdn's
// own byte tokenizer.json (data directories).
std::unique_ptr<Tokenizer> load_hf_tokenizer(const std::string& dir);

}  // namespace gdn::data
