// UTF-8 and Unicode helpers for the tokenizer.json reader (character classes from ICU).
#include "src/data/tokenizer_json_unicode.h"

#include <unicode/uchar.h>

#include <cstring>

#include "src/data/tokenizer_json_unicode_tables.h"

namespace gdn::data::tokjson {

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

namespace {
// Number of bytes at s[i..] that form a valid UTF-8 sequence (its full length when complete and
// valid), or the length of the longest valid prefix of one, as a negative number (-1 .. -3).
int valid_sequence(std::string_view s, size_t i) {
  auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  unsigned char c = b(i);
  if (c < 0x80) return 1;
  int width;
  unsigned char lo = 0x80, hi = 0xBF;
  if (c >= 0xC2 && c <= 0xDF) {
    width = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    width = 3;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    width = 4;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else {
    return -1;
  }
  for (int k = 1; k < width; ++k) {
    if (i + k >= s.size()) return -k;
    unsigned char d = b(i + k);
    unsigned char l = k == 1 ? lo : 0x80, h = k == 1 ? hi : 0xBF;
    if (d < l || d > h) return -k;
  }
  return width;
}
}  // namespace

bool valid_utf8(std::string_view s, size_t* bad) {
  size_t i = 0, n = s.size();
  while (i < n) {
    // Eight ASCII bytes at a time.
    while (i + 8 <= n) {
      uint64_t w;
      std::memcpy(&w, s.data() + i, 8);
      if (w & 0x8080808080808080ull) break;
      i += 8;
    }
    if (i >= n) break;
    int len = valid_sequence(s, i);
    if (len < 0) {
      if (bad) *bad = i;
      return false;
    }
    i += len;
  }
  return true;
}

std::string utf8_lossy(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  size_t i = 0;
  while (i < bytes.size()) {
    int len = valid_sequence(bytes, i);
    if (len > 0) {
      out.append(bytes.data() + i, len);
      i += len;
    } else {
      out += "\xEF\xBF\xBD";  // U+FFFD
      i += -len;
    }
  }
  return out;
}

namespace {
// Whether cp is in the Oniguruma set of `escape` but not in PCRE2's: characters of newer Unicode
// versions, which the Rust library (Unicode 16) knows and ICU may not.
bool newer_unicode(const char* escape, uint32_t cp) {
  const UnicodeClassDelta* d = find_unicode_class(escape);
  if (!d) return false;
  const uint32_t* r = d->missing;
  uint32_t lo = 0, hi = d->missing_ranges;
  while (lo < hi) {
    uint32_t mid = (lo + hi) / 2;
    if (cp < r[2 * mid]) {
      hi = mid;
    } else if (cp > r[2 * mid + 1]) {
      lo = mid + 1;
    } else {
      return true;
    }
  }
  return false;
}
}  // namespace

bool is_white_space(uint32_t cp) {
  if (cp < 0x80) return cp == ' ' || (cp >= 0x09 && cp <= 0x0D);
  return u_hasBinaryProperty(static_cast<UChar32>(cp), UCHAR_WHITE_SPACE);
}

bool is_word_char(uint32_t cp) {
  if (cp < 0x80) {
    return (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') || (cp >= '0' && cp <= '9') ||
           cp == '_';
  }
  auto c = static_cast<UChar32>(cp);
  if (u_hasBinaryProperty(c, UCHAR_ALPHABETIC) || u_hasBinaryProperty(c, UCHAR_JOIN_CONTROL))
    return true;
  uint32_t mask = U_GET_GC_MASK(c);
  if (mask & (U_GC_M_MASK | U_GC_ND_MASK | U_GC_PC_MASK)) return true;
  return mask == U_GC_CN_MASK && (newer_unicode("\\p{L}", cp) || newer_unicode("\\p{M}", cp) ||
                                  newer_unicode("\\p{Nd}", cp));
}

namespace {
bool in_ranges(const CodePointRanges& r, uint32_t cp) {
  uint32_t lo = 0, hi = r.count;
  while (lo < hi) {
    uint32_t mid = (lo + hi) / 2;
    if (cp < r.pairs[2 * mid]) {
      hi = mid;
    } else if (cp > r.pairs[2 * mid + 1]) {
      lo = mid + 1;
    } else {
      return true;
    }
  }
  return false;
}
}  // namespace

bool is_numeric(uint32_t cp) {
  if (cp < 0x80) return cp >= '0' && cp <= '9';
  static const CodePointRanges numeric = rust_numeric();
  return in_ranges(numeric, cp);
}

void append_lowercase(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp >= 'A' && cp <= 'Z' ? cp + 32 : cp));
    return;
  }
  static const RustLowercase table = rust_lowercase();
  for (size_t k = 0; k < table.multi_count; ++k) {
    if (table.multi[k].cp == cp) {
      out += table.multi[k].utf8;
      return;
    }
  }
  // The last run starting at or before cp.
  size_t lo = 0, hi = table.run_count;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (table.runs[mid].first <= cp) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  if (lo > 0) {
    const LowercaseRun& r = table.runs[lo - 1];
    if (cp <= r.last && (cp - r.first) % r.stride == 0) {
      append_utf8(out, static_cast<uint32_t>(static_cast<int64_t>(cp) + r.delta));
      return;
    }
  }
  append_utf8(out, cp);
}

namespace {
struct ByteLevelTables {
  std::array<std::string, 256> symbols;
  std::array<int16_t, 512> bytes;  // symbol code point (all < 512) -> byte, -1 when none
  ByteLevelTables() {
    bytes.fill(-1);
    int n = 0;
    for (int b = 0; b < 256; ++b) {
      bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
      uint32_t cp = printable ? b : 256 + n++;
      append_utf8(symbols[b], cp);
      bytes[cp] = static_cast<int16_t>(b);
    }
  }
};
const ByteLevelTables& byte_level_tables() {
  static const ByteLevelTables t;
  return t;
}
}  // namespace

const std::array<std::string, 256>& byte_level_symbols() {
  return byte_level_tables().symbols;
}

int byte_level_byte(uint32_t cp) {
  return cp < 512 ? byte_level_tables().bytes[cp] : -1;
}

}  // namespace gdn::data::tokjson
