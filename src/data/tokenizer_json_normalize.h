// Normalizers of tokenizer.json (NFC, NFKC, Lowercase, Prepend, Replace, Sequence), applied as the
// `tokenizers` library applies them to each piece of text between added tokens.
#pragma once
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace gdn::data::tokjson {

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  // Writes the normalized `in` into `out` (cleared first). `head0` is the number of leading bytes
  // of the text that stand for the first character of the whole input (the library's "original
  // offset 0", which Metaspace's prepend_scheme "first" tests); it is updated to the output.
  virtual void normalize(std::string_view in, std::string& out, uint32_t& head0) const = 0;
};

// The normalizer described by `j` (a JSON object); throws naming `where` for an unsupported type.
std::unique_ptr<Normalizer> parse_normalizer(const nlohmann::json& j, const std::string& where);

}  // namespace gdn::data::tokjson
