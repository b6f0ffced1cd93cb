// Pre-tokenizers of tokenizer.json (ByteLevel, Split, Metaspace, Digits, Sequence): they cut each
// normalized piece of text into the pre-tokens the model encodes, as the `tokenizers` library does.
#pragma once
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "src/data/tokenizer_json_regex.h"

namespace gdn::data::tokjson {

// A pre-token: bytes [off, off + len) of PreTokens::text. head0: how many of its leading bytes
// stand for the first character of the whole input (see Normalizer::normalize).
struct Span {
  uint32_t off, len, head0;
};

struct PreTokens {
  std::string text;
  std::vector<Span> spans;
};

// Buffers a pre-tokenizer reuses between calls (one per thread).
struct PreTokenizeScratch {
  PreTokens other;
  std::vector<PatternPiece> matches;
};

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  // Replaces the pre-tokens of `p` with their pieces; empty pieces are dropped.
  virtual void apply(PreTokens& p, PreTokenizeScratch& scratch) const = 0;
};

// Metaspace's prepend_scheme (shared with the Metaspace decoder), with the legacy
// add_prefix_space field read as the library reads it.
enum class PrependScheme { always, first, never };
PrependScheme parse_prepend_scheme(const nlohmann::json& j, const std::string& where);

std::unique_ptr<PreTokenizer> parse_pre_tokenizer(const nlohmann::json& j, const std::string& path);

}  // namespace gdn::data::tokjson
