// Added tokens of tokenizer.json found in text as the `tokenizers` library's AddedVocabulary finds
// them: leftmost-longest non-overlapping matches, then the single_word / lstrip / rstrip rules.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace gdn::data::tokjson {

// A cut of a text: [start, end), the added token's id or -1 for ordinary text.
struct Segment {
  uint32_t start, end;
  int32_t id;
};

struct AddedPattern {
  std::string text;  // what is matched (the content, or its normalized form)
  int32_t id;
  bool single_word, lstrip, rstrip;
};

class AddedMatcher {
 public:
  explicit AddedMatcher(std::vector<AddedPattern> patterns);
  bool empty() const { return patterns_.empty(); }
  // Cuts `text` into segments covering it (empty text: one empty segment).
  void split(std::string_view text, std::vector<Segment>& out) const;

 private:
  std::vector<AddedPattern> patterns_;
  // Trie over bytes: (node << 8 | byte) -> child; node -> index into patterns_ (or -1).
  std::unordered_map<uint64_t, int32_t> edges_;
  std::vector<int32_t> terminal_;
  bool first_byte_[256] = {};
};

}  // namespace gdn::data::tokjson
