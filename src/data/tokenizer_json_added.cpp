// Added-token matching of tokenizer.json (the library's AddedVocabulary::find_matches).
#include "src/data/tokenizer_json_added.h"

#include <algorithm>

#include "src/core/error.h"
#include "src/data/tokenizer_json_unicode.h"

namespace gdn::data::tokjson {

namespace {

// The code point that ends text[0..end) (end > 0).
uint32_t last_char(std::string_view text, size_t end) {
  size_t i = end - 1;
  while (i > 0 && (static_cast<unsigned char>(text[i]) & 0xC0) == 0x80) --i;
  int len = 0;
  return decode_utf8(text.data() + i, &len);
}

// Start of the run of White_Space characters that ends text[0..end).
size_t trailing_space_start(std::string_view text, size_t end) {
  size_t p = end;
  while (p > 0) {
    size_t i = p - 1;
    while (i > 0 && (static_cast<unsigned char>(text[i]) & 0xC0) == 0x80) --i;
    int len = 0;
    if (!is_white_space(decode_utf8(text.data() + i, &len))) break;
    p = i;
  }
  return p;
}

// Length of the run of White_Space characters that starts text[begin..].
size_t leading_space_len(std::string_view text, size_t begin) {
  size_t p = begin;
  while (p < text.size()) {
    int len = 0;
    if (!is_white_space(decode_utf8(text.data() + p, &len))) break;
    p += len;
  }
  return p - begin;
}

}  // namespace

AddedMatcher::AddedMatcher(std::vector<AddedPattern> patterns) : patterns_(std::move(patterns)) {
  terminal_.push_back(-1);
  for (size_t k = 0; k < patterns_.size(); ++k) {
    const std::string& t = patterns_[k].text;
    GDN_CHECK(!t.empty(), "added token ", patterns_[k].id, " matches the empty string");
    int32_t node = 0;
    for (char ch : t) {
      uint64_t key = (static_cast<uint64_t>(node) << 8) | static_cast<unsigned char>(ch);
      auto it = edges_.find(key);
      if (it == edges_.end()) {
        int32_t child = static_cast<int32_t>(terminal_.size());
        terminal_.push_back(-1);
        edges_.emplace(key, child);
        node = child;
      } else {
        node = it->second;
      }
    }
    GDN_CHECK(terminal_[node] < 0, "added tokens ", patterns_[terminal_[node]].id, " and ",
              patterns_[k].id, " both match \"", t, "\"");
    terminal_[node] = static_cast<int32_t>(k);
    first_byte_[static_cast<unsigned char>(t[0])] = true;
  }
}

void AddedMatcher::split(std::string_view text, std::vector<Segment>& out) const {
  if (text.empty()) {
    out.push_back({0, 0, -1});
    return;
  }
  size_t n = text.size();
  size_t start_offset = 0;
  size_t i = 0;
  while (i < n) {
    if (!first_byte_[static_cast<unsigned char>(text[i])]) {
      ++i;
      continue;
    }
    // The longest pattern starting at i.
    int32_t node = 0, best = -1;
    size_t best_end = 0;
    for (size_t j = i; j < n; ++j) {
      auto it =
          edges_.find((static_cast<uint64_t>(node) << 8) | static_cast<unsigned char>(text[j]));
      if (it == edges_.end()) break;
      node = it->second;
      if (terminal_[node] >= 0) {
        best = terminal_[node];
        best_end = j + 1;
      }
    }
    if (best < 0) {
      ++i;
      continue;
    }
    // The next search starts after this match whether or not the rules below keep it.
    size_t start = i, stop = best_end;
    i = best_end;
    const AddedPattern& p = patterns_[best];
    if (p.single_word) {
      bool start_space = start == 0 || !is_word_char(last_char(text, start));
      int len = 0;
      bool stop_space = stop == n || !is_word_char(decode_utf8(text.data() + stop, &len));
      if (!start_space || !stop_space) continue;
    }
    if (p.lstrip) start = std::max(trailing_space_start(text, start), start_offset);
    if (p.rstrip) stop += leading_space_len(text, stop);
    if (start_offset < start) {
      out.push_back({static_cast<uint32_t>(start_offset), static_cast<uint32_t>(start), -1});
    }
    out.push_back({static_cast<uint32_t>(start), static_cast<uint32_t>(stop), p.id});
    start_offset = stop;
  }
  if (start_offset != n) {
    out.push_back({static_cast<uint32_t>(start_offset), static_cast<uint32_t>(n), -1});
  }
}

}  // namespace gdn::data::tokjson
