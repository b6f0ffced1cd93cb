// Ill-formed UTF-8 in text inputs: found by Unicode's table of well-formed byte sequences (no
// overlongs, surrogates or code points above U+10FFFF), then kept as they are (the byte tokenizer
// encodes any byte) or replaced by U+FFFD, one per maximal subpart of an ill-formed sequence (the
// Unicode recommendation, as Python's errors="replace" and the WHATWG decoder do).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace gdn::data {

enum class Utf8Policy { keep, replace };

// What repair_utf8 found in one text.
struct Utf8Stats {
  int64_t invalid_bytes = 0;  // bytes inside ill-formed sequences
  int64_t replacements = 0;   // U+FFFD written (Utf8Policy::replace)
  int64_t first_offset = -1;  // offset of the first invalid byte in the input (-1: none)
};

// Bytes at s[i] that belong to one sequence: the whole well-formed sequence (1 to 4 bytes,
// `complete` true) or the maximal subpart of an ill-formed one (at least 1, `complete` false).
size_t utf8_sequence_at(std::string_view s, size_t i, bool& complete);

// What `text` holds, without changing it.
Utf8Stats check_utf8(std::string_view text);

// Applies the policy to `text` in place; returns what it found (the text is untouched when it
// is well-formed or the policy is keep).
Utf8Stats repair_utf8(std::string& text, Utf8Policy policy);

}  // namespace gdn::data
