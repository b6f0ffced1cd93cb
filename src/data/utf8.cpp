// UTF-8 sequence matching (Unicode 15, table 3-7) and the keep / replace repair of text inputs.
#include "src/data/utf8.h"

namespace gdn::data {

size_t utf8_sequence_at(std::string_view s, size_t i, bool& complete) {
  const auto c = uint8_t(s[i]);
  complete = false;
  if (c < 0x80) {
    complete = true;
    return 1;
  }
  // Continuation bytes needed and the range allowed for the first of them.
  int need;
  uint8_t lo = 0x80, hi = 0xBF;
  if (c >= 0xC2 && c <= 0xDF) {
    need = 1;
  } else if (c == 0xE0) {
    need = 2, lo = 0xA0;  // no overlongs
  } else if ((c >= 0xE1 && c <= 0xEC) || c == 0xEE || c == 0xEF) {
    need = 2;
  } else if (c == 0xED) {
    need = 2, hi = 0x9F;  // no surrogates
  } else if (c == 0xF0) {
    need = 3, lo = 0x90;  // no overlongs
  } else if (c >= 0xF1 && c <= 0xF3) {
    need = 3;
  } else if (c == 0xF4) {
    need = 3, hi = 0x8F;  // nothing above U+10FFFF
  } else {
    return 1;  // 80-C1 and F5-FF never start a sequence
  }
  for (int k = 1; k <= need; ++k) {
    if (i + size_t(k) >= s.size()) return size_t(k);
    const auto b = uint8_t(s[i + size_t(k)]);
    if (b < lo || b > hi) return size_t(k);
    lo = 0x80, hi = 0xBF;
  }
  complete = true;
  return size_t(need) + 1;
}

namespace {

// Scans `text`; with `out`, writes the repaired text there from the first invalid byte on (the
// caller keeps `text` when nothing was replaced).
Utf8Stats scan(std::string_view text, std::string* out) {
  Utf8Stats st;
  size_t i = 0, copied = 0;
  const size_t n = text.size();
  while (i < n) {
    if (uint8_t(text[i]) < 0x80) {  // ASCII: the common case, no table lookup
      ++i;
      continue;
    }
    bool complete;
    const size_t len = utf8_sequence_at(text, i, complete);
    if (!complete) {
      if (st.first_offset < 0) st.first_offset = int64_t(i);
      st.invalid_bytes += int64_t(len);
      if (out) {
        out->append(text.substr(copied, i - copied));
        *out += "\xEF\xBF\xBD";  // U+FFFD
        ++st.replacements;
        copied = i + len;
      }
    }
    i += len;
  }
  if (out && st.replacements > 0) out->append(text.substr(copied));
  return st;
}

}  // namespace

Utf8Stats check_utf8(std::string_view text) {
  return scan(text, nullptr);
}

Utf8Stats repair_utf8(std::string& text, Utf8Policy policy) {
  if (policy == Utf8Policy::keep) return scan(text, nullptr);
  std::string out;
  const Utf8Stats st = scan(text, &out);
  if (st.replacements > 0) text.swap(out);
  return st;
}

}  // namespace gdn::data
