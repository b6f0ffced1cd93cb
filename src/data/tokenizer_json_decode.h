// Decoders of tokenizer.json (ByteLevel, Metaspace, Replace, ByteFallback, Fuse, Strip,
// Sequence): token strings back to text, as the `tokenizers` library's decode_chain.
#pragma once
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace gdn::data::tokjson {

class Decoder {
 public:
  virtual ~Decoder() = default;
  // Rewrites the token strings in place (a step may fuse them into fewer).
  virtual void decode_chain(std::vector<std::string>& tokens) const = 0;
};

std::unique_ptr<Decoder> parse_decoder(const nlohmann::json& j, const std::string& path);

}  // namespace gdn::data::tokjson
