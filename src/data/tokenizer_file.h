// Tokenizers named by the user: `--tokenizer` of prepare-data and tokenize, `data.tokenizer` of a
// config. A name is one of
//   byte            gdn's byte tokenizer (ids = UTF-8 bytes)
//   sentencepiece   a SentencePiece model trained on the corpus (prepare-data only)
//   PATH            a Hugging Face tokenizer.json, a directory holding one (a model directory)
//                   or a tokenizer.model, or a SentencePiece .model file
// A tokenizer.json becomes the `huggingface` tokenizer: its ids are those of the `tokenizers`
// library (tokenizer_json.h), and training's bos and eos are added tokens of the file, chosen as
// SpecialTokens says. Saved (into a data directory or a checkpoint) it is the file as it was, byte
// for byte, with a tokenizer_config.json that names those bos and eos.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "src/data/tokenizer.h"

namespace gdn::data {

// Which added tokens are bos and eos. Empty: the tokenizer_config.json beside the file (a model
// directory's), else the one added special token with a known name (<s>, <|begin_of_text|>,
// <bos>; </s>, <|endoftext|>, <|end_of_text|>, <eos>), else none. Several known names for one
// role are an error that asks for --bos/--eos.
struct SpecialTokens {
  std::string bos, eos;
};

// The name of the tokenizer kind a tokenizer.json loads as.
inline constexpr const char* kHuggingFaceTokenizer = "huggingface";

// Opens a tokenizer.json; errors name the file and what it lacks or what is unsupported.
std::unique_ptr<Tokenizer> open_tokenizer_json(const std::string& path,
                                               const SpecialTokens& specials = {});

// Whether `name` is a path (not `byte` or `sentencepiece`).
bool names_a_file(const std::string& name);
// The tokenizer a name stands for (see the top of this file); `sentencepiece` is refused here
// (it is trained by prepare-data). Errors say what the path is and what was looked for.
std::unique_ptr<Tokenizer> open_named_tokenizer(const std::string& name,
                                                const SpecialTokens& specials = {});

}  // namespace gdn::data
