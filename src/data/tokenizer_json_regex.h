// The regular expressions of tokenizer.json files, run with PCRE2 (JIT) so that they match what
// the `tokenizers` library's Oniguruma (Ruby syntax) matches: patterns are translated (Unicode
// classes made to match Oniguruma's tables, Ruby's (?m), \h, \u, line anchors) and matches are
// iterated as the onig crate's find_iter does. A construct whose meaning could differ and that the
// translation does not cover is refused at load.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace gdn::data::tokjson {

// One piece of a string cut by a pattern: [start, end) and whether the pattern matched it.
struct PatternPiece {
  uint32_t start, end;
  bool is_match;
};

class Regex {
 public:
  // `literal`: the pattern is a plain string (tokenizer.json's {"String": ...}). `where` names the
  // component and file for errors.
  Regex(const std::string& pattern, bool literal, const std::string& where);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // Calls fn(start, end) for each match in `text` (valid UTF-8), left to right, as onig's
  // find_iter: an empty match right after a match is skipped, the search then moves on one char.
  template <typename F>
  void for_each_match(std::string_view text, F&& fn) const {
    size_t last_end = 0;
    bool skip_next_empty = false;
    while (last_end <= text.size()) {
      size_t s, e;
      if (!search(text, last_end, &s, &e)) break;
      last_end = e;
      if (s == e) {
        last_end += e < text.size() ? utf8_char_len(text, e) : 1;
        if (skip_next_empty) {
          skip_next_empty = false;
          continue;
        }
      } else {
        skip_next_empty = true;
      }
      fn(s, e);
    }
  }
  // The library's Pattern::find_matches: pieces covering all of `text` (one non-match piece
  // (0, 0) for an empty text), appended to `out`.
  void find_matches(std::string_view text, std::vector<PatternPiece>& out) const;

  const std::string& translated() const { return translated_; }

 private:
  bool search(std::string_view text, size_t start, size_t* s, size_t* e) const;
  static size_t utf8_char_len(std::string_view text, size_t i);

  void* code_ = nullptr;  // pcre2_code*
  std::string translated_;
  std::string where_;
};

// The PCRE2 pattern for an Oniguruma (Ruby syntax) pattern; throws naming `where` for constructs
// whose meaning is not reproduced.
std::string translate_onig_pattern(const std::string& pattern, const std::string& where);

}  // namespace gdn::data::tokjson
