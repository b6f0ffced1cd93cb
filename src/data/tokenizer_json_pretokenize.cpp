// Pre-tokenizers of tokenizer.json, following the `tokenizers` library's split behaviours.
#include "src/data/tokenizer_json_pretokenize.h"

#include <algorithm>

#include "src/data/tokenizer_json_fields.h"

namespace gdn::data::tokjson {

namespace {

enum class Behavior { removed, isolated, merged_with_previous, merged_with_next, contiguous };

Behavior parse_behavior(const Json& j, const std::string& where) {
  std::string b = string_field(j, "behavior", where);
  if (b == "Removed") return Behavior::removed;
  if (b == "Isolated") return Behavior::isolated;
  if (b == "MergedWithPrevious") return Behavior::merged_with_previous;
  if (b == "MergedWithNext") return Behavior::merged_with_next;
  if (b == "Contiguous") return Behavior::contiguous;
  GDN_FAIL(where, ": unknown split behavior \"", b, "\"");
}

// The library's NormalizedString::split: `m` (pieces of the span at `parent`, relative offsets)
// grouped per `behavior`; the kept, non-empty pieces are appended to `out`.
void split_span(std::vector<PatternPiece>& m, Behavior behavior, const Span& parent,
                std::vector<Span>& out) {
  // Fold in place into m[0..n) with is_match reused as "remove".
  size_t n = 0;
  switch (behavior) {
    case Behavior::isolated:
      for (auto& x : m) x.is_match = false;
      n = m.size();
      break;
    case Behavior::removed:
      n = m.size();
      break;
    case Behavior::contiguous: {
      bool previous = false;
      for (const PatternPiece& x : m) {
        bool is_match = x.is_match;  // read before m[n] (possibly x itself) is overwritten
        if (is_match == previous && n > 0) {
          m[n - 1].end = x.end;
        } else {
          m[n++] = {x.start, x.end, false};
        }
        previous = is_match;
      }
      for (size_t k = 0; k < n; ++k) m[k].is_match = false;
      break;
    }
    case Behavior::merged_with_previous: {
      bool previous = false;
      for (const PatternPiece& x : m) {
        bool is_match = x.is_match;
        if (is_match && !previous && n > 0) {
          m[n - 1].end = x.end;
        } else {
          m[n++] = {x.start, x.end, false};
        }
        previous = is_match;
      }
      break;
    }
    case Behavior::merged_with_next: {
      // Folded from the end, then read back in order.
      std::reverse(m.begin(), m.end());
      bool previous = false;
      for (const PatternPiece& x : m) {
        bool is_match = x.is_match;
        if (is_match && !previous && n > 0) {
          m[n - 1].start = x.start;
        } else {
          m[n++] = {x.start, x.end, false};
        }
        previous = is_match;
      }
      std::reverse(m.begin(), m.begin() + static_cast<ptrdiff_t>(n));
      break;
    }
  }
  for (size_t k = 0; k < n; ++k) {
    const PatternPiece& x = m[k];
    if (x.is_match || x.end == x.start) continue;
    uint32_t h = parent.head0 > x.start ? parent.head0 - x.start : 0;
    out.push_back({parent.off + x.start, x.end - x.start, h});
  }
}

// The library's Pattern for a char predicate: single matching characters and the runs between.
template <typename Pred>
void find_char_matches(std::string_view text, Pred pred, std::vector<PatternPiece>& out) {
  if (text.empty()) {
    out.push_back({0, 0, false});
    return;
  }
  uint32_t last = 0;
  for (uint32_t i = 0; i < text.size();) {
    int len = 0;
    uint32_t cp = decode_utf8(text.data() + i, &len);
    if (pred(cp)) {
      if (last < i) out.push_back({last, i, false});
      out.push_back({i, i + static_cast<uint32_t>(len), true});
      last = i + static_cast<uint32_t>(len);
    }
    i += static_cast<uint32_t>(len);
  }
  if (last < text.size()) out.push_back({last, static_cast<uint32_t>(text.size()), false});
}

class Split : public PreTokenizer {
 public:
  Split(std::unique_ptr<Regex> pattern, Behavior behavior, bool invert)
      : pattern_(std::move(pattern)), behavior_(behavior), invert_(invert) {}
  void apply(PreTokens& p, PreTokenizeScratch& s) const override {
    s.other.spans.clear();
    for (const Span& span : p.spans) {
      s.matches.clear();
      pattern_->find_matches(std::string_view(p.text).substr(span.off, span.len), s.matches);
      if (invert_)
        for (auto& x : s.matches) x.is_match = !x.is_match;
      split_span(s.matches, behavior_, span, s.other.spans);
    }
    p.spans.swap(s.other.spans);
  }

 private:
  std::unique_ptr<Regex> pattern_;
  Behavior behavior_;
  bool invert_;
};

class Digits : public PreTokenizer {
 public:
  explicit Digits(bool individual) : individual_(individual) {}
  void apply(PreTokens& p, PreTokenizeScratch& s) const override {
    s.other.spans.clear();
    for (const Span& span : p.spans) {
      s.matches.clear();
      find_char_matches(std::string_view(p.text).substr(span.off, span.len), is_numeric, s.matches);
      split_span(s.matches, individual_ ? Behavior::isolated : Behavior::contiguous, span,
                 s.other.spans);
    }
    p.spans.swap(s.other.spans);
  }

 private:
  bool individual_;
};

class Metaspace : public PreTokenizer {
 public:
  Metaspace(uint32_t replacement, PrependScheme scheme, bool split)
      : replacement_(replacement), scheme_(scheme), split_(split) {
    append_utf8(rep_, replacement);
  }
  void apply(PreTokens& p, PreTokenizeScratch& s) const override {
    PreTokens& o = s.other;
    o.text.clear();
    o.spans.clear();
    for (const Span& span : p.spans) {
      std::string_view in = std::string_view(p.text).substr(span.off, span.len);
      int len0 = 0;
      uint32_t first = decode_utf8(in.data(), &len0);
      bool starts_with_rep = first == ' ' || first == replacement_;
      bool prepend = !starts_with_rep && (scheme_ == PrependScheme::always ||
                                          (scheme_ == PrependScheme::first && span.head0 > 0));
      uint32_t start = static_cast<uint32_t>(o.text.size());
      uint32_t head0 = 0;
      if (prepend) {
        o.text += rep_;
        if (span.head0 > 0) head0 += static_cast<uint32_t>(rep_.size());
      }
      for (uint32_t i = 0; i < in.size(); ++i) {
        if (in[i] == ' ') {
          o.text += rep_;
          if (i < span.head0) head0 += static_cast<uint32_t>(rep_.size());
        } else {
          o.text += in[i];
          if (i < span.head0) ++head0;
        }
      }
      Span whole{start, static_cast<uint32_t>(o.text.size()) - start, head0};
      if (!split_) {
        o.spans.push_back(whole);
        continue;
      }
      s.matches.clear();
      uint32_t rep = replacement_;
      find_char_matches(
          std::string_view(o.text).substr(whole.off, whole.len),
          [rep](uint32_t cp) { return cp == rep; }, s.matches);
      split_span(s.matches, Behavior::merged_with_next, whole, o.spans);
    }
    std::swap(p.text, o.text);
    std::swap(p.spans, o.spans);
  }

 private:
  uint32_t replacement_;
  std::string rep_;
  PrependScheme scheme_;
  bool split_;
};

class ByteLevel : public PreTokenizer {
 public:
  ByteLevel(bool add_prefix_space, bool use_regex, const std::string& where)
      : add_prefix_space_(add_prefix_space), symbols_(byte_level_symbols()) {
    if (use_regex) {
      regex_ = std::make_unique<Regex>(
          R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)", false,
          where);
    }
  }
  void apply(PreTokens& p, PreTokenizeScratch& s) const override {
    PreTokens& o = s.other;
    o.text.clear();
    o.spans.clear();
    std::string prefixed;
    for (const Span& span : p.spans) {
      std::string_view in = std::string_view(p.text).substr(span.off, span.len);
      uint32_t h = span.head0;
      if (add_prefix_space_ && in[0] != ' ') {
        prefixed.assign(1, ' ');
        prefixed.append(in.data(), in.size());
        in = prefixed;
        if (h > 0) ++h;
      }
      if (!regex_) {
        map(in, h, o);
        continue;
      }
      size_t prev = 0;
      auto piece = [&](size_t a, size_t b) {
        if (b > a) map(in.substr(a, b - a), h > a ? h - static_cast<uint32_t>(a) : 0, o);
      };
      regex_->for_each_match(in, [&](size_t a, size_t b) {
        piece(prev, a);
        piece(a, b);
        prev = b;
      });
      piece(prev, in.size());
    }
    std::swap(p.text, o.text);
    std::swap(p.spans, o.spans);
  }

 private:
  // Appends the byte-level symbols of `in` to o.text as one pre-token.
  void map(std::string_view in, uint32_t h, PreTokens& o) const {
    uint32_t start = static_cast<uint32_t>(o.text.size());
    uint32_t head0 = 0;
    for (uint32_t i = 0; i < in.size(); ++i) {
      const std::string& sym = symbols_[static_cast<unsigned char>(in[i])];
      o.text += sym;
      if (i < h) head0 += static_cast<uint32_t>(sym.size());
    }
    o.spans.push_back({start, static_cast<uint32_t>(o.text.size()) - start, head0});
  }

  bool add_prefix_space_;
  const std::array<std::string, 256>& symbols_;
  std::unique_ptr<Regex> regex_;
};

class Sequence : public PreTokenizer {
 public:
  explicit Sequence(std::vector<std::unique_ptr<PreTokenizer>> steps) : steps_(std::move(steps)) {}
  void apply(PreTokens& p, PreTokenizeScratch& s) const override {
    for (const auto& step : steps_) step->apply(p, s);
  }

 private:
  std::vector<std::unique_ptr<PreTokenizer>> steps_;
};

}  // namespace

PrependScheme parse_prepend_scheme(const Json& j, const std::string& where) {
  PrependScheme scheme = PrependScheme::always;
  auto it = j.find("prepend_scheme");
  if (it != j.end() && !it->is_null()) {
    std::string s = string_field(j, "prepend_scheme", where);
    if (s == "always") {
      scheme = PrependScheme::always;
    } else if (s == "first") {
      scheme = PrependScheme::first;
    } else if (s == "never") {
      scheme = PrependScheme::never;
    } else {
      GDN_FAIL(where, ": unknown prepend_scheme \"", s, "\"");
    }
  }
  // Files from before prepend_scheme: add_prefix_space false means never.
  auto legacy = j.find("add_prefix_space");
  if (legacy != j.end() && legacy->is_boolean() && !legacy->get<bool>()) {
    GDN_CHECK(scheme == PrependScheme::never, where,
              ": add_prefix_space does not match declared prepend_scheme");
    scheme = PrependScheme::never;
  }
  return scheme;
}

std::unique_ptr<PreTokenizer> parse_pre_tokenizer(const Json& j, const std::string& path) {
  std::string type = type_field(j, "pre_tokenizer", path);
  std::string where = path + ": pre_tokenizer " + type;
  if (type == "ByteLevel") {
    return std::make_unique<ByteLevel>(bool_field(j, "add_prefix_space", where, true),
                                       bool_field(j, "use_regex", where, true), where);
  }
  if (type == "Split") {
    return std::make_unique<Split>(pattern_field(j, where), parse_behavior(j, where),
                                   bool_field(j, "invert", where, false));
  }
  if (type == "Metaspace") {
    return std::make_unique<Metaspace>(char_field(j, "replacement", where),
                                       parse_prepend_scheme(j, where),
                                       bool_field(j, "split", where, true));
  }
  if (type == "Digits") {
    return std::make_unique<Digits>(bool_field(j, "individual_digits", where, false));
  }
  if (type == "Sequence") {
    const Json& list = required_field(j, "pretokenizers", where);
    GDN_CHECK(list.is_array(), where, ": \"pretokenizers\" must be an array");
    std::vector<std::unique_ptr<PreTokenizer>> steps;
    for (const Json& n : list) steps.push_back(parse_pre_tokenizer(n, path));
    return std::make_unique<Sequence>(std::move(steps));
  }
  GDN_FAIL(path, ": unsupported pre_tokenizer type \"", type,
           "\" (supported: ByteLevel, Split, Metaspace, Digits, Sequence)");
}

}  // namespace gdn::data::tokjson
