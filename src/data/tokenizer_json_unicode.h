// UTF-8 and Unicode helpers for the tokenizer.json reader, each matching what the Rust
// `tokenizers` library does with the same input (Rust's char and String semantics).
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace gdn::data::tokjson {

// Length of the UTF-8 sequence that starts with `lead` (valid UTF-8 assumed; 1 for a stray byte).
inline int utf8_len(unsigned char lead) {
  return lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
}
// The code point at p (valid UTF-8 assumed); its length in *len.
inline uint32_t decode_utf8(const char* p, int* len) {
  const auto* u = reinterpret_cast<const unsigned char*>(p);
  int n = utf8_len(u[0]);
  *len = n;
  if (n == 1) return u[0];
  if (n == 2) return ((u[0] & 0x1Fu) << 6) | (u[1] & 0x3Fu);
  if (n == 3) return ((u[0] & 0x0Fu) << 12) | ((u[1] & 0x3Fu) << 6) | (u[2] & 0x3Fu);
  return ((u[0] & 0x07u) << 18) | ((u[1] & 0x3Fu) << 12) | ((u[2] & 0x3Fu) << 6) | (u[3] & 0x3Fu);
}
void append_utf8(std::string& out, uint32_t cp);

// True when `s` is well-formed UTF-8; else *bad (when given) is the offset of the first bad byte.
bool valid_utf8(std::string_view s, size_t* bad = nullptr);
// Rust's String::from_utf8_lossy: each maximal invalid subsequence becomes one U+FFFD.
std::string utf8_lossy(std::string_view bytes);

// Character classes as the Rust library sees them: ICU's tables, plus the characters of newer
// Unicode versions than ICU's that tokenizer_json_unicode_tables.h lists (Rust: Unicode 16).
// The `regex` crate's classes, used by the added-token word and whitespace rules:
bool is_white_space(uint32_t cp);  // \s: Unicode White_Space
bool is_word_char(uint32_t cp);    // \w: Alphabetic, M, Nd, Pc, Join_Control
// Rust char::is_numeric (general category Nd, Nl or No), from the Rust tables.
bool is_numeric(uint32_t cp);
// Rust char::to_lowercase (full mapping, no context) appended as UTF-8, from the Rust tables.
void append_lowercase(std::string& out, uint32_t cp);

// GPT-2's bytes_to_unicode: the UTF-8 of the symbol standing for byte b.
const std::array<std::string, 256>& byte_level_symbols();
// The byte a byte-level symbol stands for, or -1 when cp is not one.
int byte_level_byte(uint32_t cp);

}  // namespace gdn::data::tokjson
