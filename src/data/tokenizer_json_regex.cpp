// PCRE2 (JIT) runner for tokenizer.json patterns, translated from Oniguruma's Ruby syntax.
#include "src/data/tokenizer_json_regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <cstdio>

#include "src/core/error.h"
#include "src/data/tokenizer_json_unicode.h"
#include "src/data/tokenizer_json_unicode_tables.h"

namespace gdn::data::tokjson {

namespace {

std::string hex_cp(uint32_t cp) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "\\x{%X}", cp);
  return buf;
}

void append_ranges(std::string& out, const uint32_t* pairs, uint32_t n) {
  for (uint32_t k = 0; k < n; ++k) {
    uint32_t lo = pairs[2 * k], hi = pairs[2 * k + 1];
    out += hex_cp(lo);
    if (hi != lo) out += "-" + hex_cp(hi);
  }
}

// The complement in [1, 0x10FFFF] of sorted, disjoint [lo, hi] pairs, as class contents.
void append_complement(std::string& out, const uint32_t* pairs, uint32_t n) {
  uint32_t next = 0;
  for (uint32_t k = 0; k < n; ++k) {
    uint32_t lo = pairs[2 * k], hi = pairs[2 * k + 1];
    if (lo > next) {
      out += hex_cp(next);
      if (lo - 1 != next) out += "-" + hex_cp(lo - 1);
    }
    next = hi + 1;
  }
  if (next <= 0x10FFFF) out += hex_cp(next) + "-" + hex_cp(0x10FFFF);
}

// Appends the PCRE2 form of a Unicode class escape (`escape` is its positive form, `negated`
// whether the pattern wrote \S, \P{..} ...), `in_class` when inside [...].
void emit_class(std::string& out, const std::string& escape, bool negated, bool in_class,
                const std::string& where) {
  const UnicodeClassDelta* d = find_unicode_class(escape);
  GDN_CHECK(d, where, ": the regex class ", (negated ? "negated " : ""), escape,
            " is not supported (its Oniguruma and PCRE2 membership is not tabulated)");
  bool same = d->missing_ranges == 0 && !d->pcre_has_extra;
  // Contents of a positive class equal to Oniguruma's set.
  std::string contents;
  if (d->pcre_has_extra) {
    GDN_CHECK(d->exact, where, ": the regex class ", escape,
              " matches characters in PCRE2 that it does not in Oniguruma");
    append_ranges(contents, d->exact, d->exact_ranges);
  } else {
    contents = escape;
    append_ranges(contents, d->missing, d->missing_ranges);
  }
  if (!negated) {
    if (in_class) {
      out += contents;
    } else {
      out += "[" + contents + "]";
    }
    return;
  }
  if (!in_class) {
    out += "[^" + contents + "]";
    return;
  }
  if (same) {
    // The native negated escape: \S, \D, \W or \P{..}.
    if (escape.size() == 2) {
      out += std::string("\\") + static_cast<char>(escape[1] - 'a' + 'A');
    } else {
      out += "\\P" + escape.substr(2);
    }
    return;
  }
  GDN_CHECK(d->exact, where, ": the negated regex class ", escape,
            " inside [...] cannot be reproduced with PCRE2");
  append_complement(out, d->exact, d->exact_ranges);
}

bool is_hex(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

}  // namespace

std::string translate_onig_pattern(const std::string& p, const std::string& where) {
  std::string out;
  out.reserve(p.size() * 2);
  bool in_class = false;
  size_t class_start = 0;  // index in p just after '[' or '[^'
  size_t i = 0, n = p.size();
  while (i < n) {
    char c = p[i];
    if (c == '\\') {
      GDN_CHECK(i + 1 < n, where, ": regex ends with a lone backslash: ", p);
      char e = p[i + 1];
      if (e == 's' || e == 'd' || e == 'w' || e == 'S' || e == 'D' || e == 'W') {
        bool neg = e >= 'A' && e <= 'Z';
        emit_class(out, std::string("\\") + static_cast<char>(neg ? e - 'A' + 'a' : e), neg,
                   in_class, where);
        i += 2;
      } else if (e == 'p' || e == 'P') {
        GDN_CHECK(i + 2 < n && p[i + 2] == '{', where, ": regex property without braces in ", p);
        size_t close = p.find('}', i + 3);
        GDN_CHECK(close != std::string::npos, where, ": unterminated \\p{ in ", p);
        std::string name = p.substr(i + 3, close - i - 3);
        bool neg = e == 'P';
        if (!name.empty() && name[0] == '^') {
          neg = !neg;
          name = name.substr(1);
        }
        emit_class(out, "\\p{" + name + "}", neg, in_class, where);
        i = close + 1;
      } else if (e == 'h' || e == 'H') {
        // Ruby syntax: \h is a hexadecimal digit.
        const char* hex = "0-9a-fA-F";
        if (in_class) {
          GDN_CHECK(e == 'h', where, ": \\H inside [...] is not supported in ", p);
          out += hex;
        } else {
          out += std::string(e == 'h' ? "[" : "[^") + hex + "]";
        }
        i += 2;
      } else if (e == 'v') {
        out += "\\x{B}";  // Ruby: vertical tab (PCRE2: vertical space class)
        i += 2;
      } else if (e == 'u' && i + 5 < n && is_hex(p[i + 2]) && is_hex(p[i + 3]) &&
                 is_hex(p[i + 4]) && is_hex(p[i + 5])) {
        out += "\\x{" + p.substr(i + 2, 4) + "}";
        i += 6;
      } else if (e == 'b' || e == 'B') {
        GDN_FAIL(where, ": word boundaries (\\b, \\B) are not supported in regex ", p);
      } else if (e == 'x' && i + 2 < n && p[i + 2] == '{') {
        size_t close = p.find('}', i + 3);
        GDN_CHECK(close != std::string::npos, where, ": unterminated \\x{ in ", p);
        out += p.substr(i, close + 1 - i);
        i = close + 1;
      } else if (e == 'k' || e == 'g' || e == 'K' || e == 'y' || e == 'Y' || e == 'O' || e == 'N' ||
                 e == 'o' || e == 'c' || e == 'C' || e == 'M') {
        GDN_FAIL(where, ": the regex escape \\", e, " is not supported in ", p);
      } else {
        // Escaped punctuation, \n \t \r \f \a \e, \x41, \0.., \A \z \Z \G \R \X: same meaning.
        int len = utf8_len(static_cast<unsigned char>(e));
        out += p.substr(i, 1 + len);
        i += 1 + len;
      }
      continue;
    }
    if (in_class) {
      if (c == '[') {
        GDN_FAIL(where, ": nested character classes and POSIX brackets are not supported in ", p);
      }
      if (c == '&' && i + 1 < n && p[i + 1] == '&') {
        GDN_FAIL(where, ": class intersection (&&) is not supported in ", p);
      }
      if (c == ']' && i != class_start) in_class = false;
      out += c;
      ++i;
      continue;
    }
    if (c == '[') {
      in_class = true;
      out += c;
      ++i;
      if (i < n && p[i] == '^') {
        out += '^';
        ++i;
      }
      class_start = i;
      continue;
    }
    if (c == '(' && i + 2 < n && p[i + 1] == '?') {
      // Option groups (?imx-imx) and (?imx-imx: ...): Ruby's m is PCRE2's s (dot matches \n).
      size_t k = i + 2;
      std::string opts;
      while (k < n && (p[k] == 'i' || p[k] == 'm' || p[k] == 'x' || p[k] == '-')) {
        opts += p[k] == 'm' ? 's' : p[k];
        ++k;
      }
      if (!opts.empty()) {
        GDN_CHECK(k < n && (p[k] == ':' || p[k] == ')'), where,
                  ": unsupported regex group option in ", p);
        out += "(?" + opts;
        i = k;
        continue;
      }
      char g = p[i + 2];
      bool known = g == ':' || g == '=' || g == '!' || g == '>' || g == '<' || g == '#';
      GDN_CHECK(known, where, ": unsupported regex group (?", g, " in ", p);
      out += "(?";
      i += 2;
      continue;
    }
    out += c;
    ++i;
  }
  GDN_CHECK(!in_class, where, ": unterminated character class in regex ", p);
  return out;
}

namespace {

// Per-thread PCRE2 match data and JIT stack (a pattern's code is shared between threads).
struct ThreadMatchState {
  pcre2_match_data* data = nullptr;
  pcre2_match_context* context = nullptr;
  pcre2_jit_stack* stack = nullptr;
  ThreadMatchState() {
    data = pcre2_match_data_create(1, nullptr);
    context = pcre2_match_context_create(nullptr);
    stack = pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, nullptr);
    if (context && stack) pcre2_jit_stack_assign(context, nullptr, stack);
  }
  ~ThreadMatchState() {
    pcre2_match_data_free(data);
    pcre2_match_context_free(context);
    pcre2_jit_stack_free(stack);
  }
};
ThreadMatchState& thread_match_state() {
  thread_local ThreadMatchState state;
  return state;
}

}  // namespace

Regex::Regex(const std::string& pattern, bool literal, const std::string& where) : where_(where) {
  translated_ = literal ? pattern : translate_onig_pattern(pattern, where);
  uint32_t options = PCRE2_UTF | PCRE2_UCP | PCRE2_MULTILINE;
  if (literal) options = PCRE2_UTF | PCRE2_LITERAL;
  pcre2_compile_context* cc = pcre2_compile_context_create(nullptr);
  pcre2_set_newline(cc, PCRE2_NEWLINE_LF);  // Oniguruma's line end is \n alone
  int err = 0;
  PCRE2_SIZE err_offset = 0;
  auto* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(translated_.data()), translated_.size(),
                             options, &err, &err_offset, cc);
  pcre2_compile_context_free(cc);
  if (!code) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(err, msg, sizeof msg);
    GDN_FAIL(where, ": cannot compile regex ", pattern, " (as PCRE2 ", translated_,
             "): ", reinterpret_cast<const char*>(msg), " at offset ", err_offset);
  }
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // falls back to the interpreter when unavailable
  code_ = code;
}

Regex::~Regex() {
  pcre2_code_free(static_cast<pcre2_code*>(code_));
}

size_t Regex::utf8_char_len(std::string_view text, size_t i) {
  return static_cast<size_t>(utf8_len(static_cast<unsigned char>(text[i])));
}

bool Regex::search(std::string_view text, size_t start, size_t* s, size_t* e) const {
  ThreadMatchState& st = thread_match_state();
  int rc = pcre2_match(static_cast<pcre2_code*>(code_), reinterpret_cast<PCRE2_SPTR>(text.data()),
                       text.size(), start, PCRE2_NO_UTF_CHECK, st.data, st.context);
  if (rc == PCRE2_ERROR_NOMATCH) return false;
  if (rc < 0) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(rc, msg, sizeof msg);
    GDN_FAIL(where_, ": regex match failed: ", reinterpret_cast<const char*>(msg));
  }
  PCRE2_SIZE* ov = pcre2_get_ovector_pointer(st.data);
  *s = ov[0];
  *e = ov[1];
  return true;
}

void Regex::find_matches(std::string_view text, std::vector<PatternPiece>& out) const {
  if (text.empty()) {
    out.push_back({0, 0, false});
    return;
  }
  size_t prev = 0;
  for_each_match(text, [&](size_t s, size_t e) {
    if (prev != s) out.push_back({static_cast<uint32_t>(prev), static_cast<uint32_t>(s), false});
    out.push_back({static_cast<uint32_t>(s), static_cast<uint32_t>(e), true});
    prev = e;
  });
  if (prev != text.size()) {
    out.push_back({static_cast<uint32_t>(prev), static_cast<uint32_t>(text.size()), false});
  }
}

}  // namespace gdn::data::tokjson
