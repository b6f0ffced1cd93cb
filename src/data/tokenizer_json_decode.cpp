// Decoders of tokenizer.json, each the library's decode_chain step for step.
#include "src/data/tokenizer_json_decode.h"

#include "src/data/tokenizer_json_fields.h"
#include "src/data/tokenizer_json_pretokenize.h"

namespace gdn::data::tokjson {

namespace {

// All tokens' byte-level symbols back to bytes (a token with any other character keeps its own
// UTF-8 bytes), then one string, invalid UTF-8 replaced by U+FFFD.
class ByteLevelDecoder : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::string bytes;
    for (const std::string& t : tokens) {
      size_t start = bytes.size();
      bool all = true;
      for (size_t i = 0; i < t.size();) {
        int len = 0;
        int b = byte_level_byte(decode_utf8(t.data() + i, &len));
        if (b < 0) {
          all = false;
          break;
        }
        bytes.push_back(static_cast<char>(b));
        i += len;
      }
      if (!all) {
        bytes.resize(start);
        bytes += t;
      }
    }
    tokens.assign(1, utf8_lossy(bytes));
  }
};

class MetaspaceDecoder : public Decoder {
 public:
  MetaspaceDecoder(uint32_t replacement, PrependScheme scheme)
      : replacement_(replacement), scheme_(scheme) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (size_t k = 0; k < tokens.size(); ++k) {
      const std::string& t = tokens[k];
      std::string out;
      for (size_t i = 0; i < t.size();) {
        int len = 0;
        uint32_t cp = decode_utf8(t.data() + i, &len);
        if (cp == replacement_) {
          if (!(k == 0 && scheme_ != PrependScheme::never)) out += ' ';
        } else {
          out.append(t, i, len);
        }
        i += len;
      }
      tokens[k] = std::move(out);
    }
  }

 private:
  uint32_t replacement_;
  PrependScheme scheme_;
};

class ReplaceDecoder : public Decoder {
 public:
  ReplaceDecoder(std::unique_ptr<Regex> pattern, std::string content)
      : pattern_(std::move(pattern)), content_(std::move(content)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::vector<PatternPiece> pieces;
    for (std::string& t : tokens) {
      pieces.clear();
      pattern_->find_matches(t, pieces);
      std::string out;
      for (const PatternPiece& p : pieces) {
        if (p.is_match) {
          out += content_;
        } else {
          out.append(t, p.start, p.end - p.start);
        }
      }
      t = std::move(out);
    }
  }

 private:
  std::unique_ptr<Regex> pattern_;
  std::string content_;
};

// Runs of <0xNN> tokens become the string of their bytes when it is valid UTF-8, else one
// U+FFFD per byte.
class ByteFallbackDecoder : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::vector<std::string> out;
    std::string pending;
    auto flush = [&]() {
      if (pending.empty()) return;
      if (valid_utf8(pending)) {
        out.push_back(pending);
      } else {
        for (size_t i = 0; i < pending.size(); ++i) out.emplace_back("\xEF\xBF\xBD");
      }
      pending.clear();
    };
    for (std::string& t : tokens) {
      int byte = -1;
      if (t.size() == 6 && t.compare(0, 3, "<0x") == 0 && t[5] == '>') byte = parse_hex(t[3], t[4]);
      if (byte >= 0) {
        pending.push_back(static_cast<char>(byte));
      } else {
        flush();
        out.push_back(std::move(t));
      }
    }
    flush();
    tokens = std::move(out);
  }

 private:
  static int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }
  // Rust's u8::from_str_radix(s, 16) on two characters (a leading '+' is allowed).
  static int parse_hex(char a, char b) {
    int lo = hex_digit(b);
    if (lo < 0) return -1;
    if (a == '+') return lo;
    int hi = hex_digit(a);
    return hi < 0 ? -1 : hi * 16 + lo;
  }
};

class FuseDecoder : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::string all;
    for (const std::string& t : tokens) all += t;
    tokens.assign(1, std::move(all));
  }
};

class StripDecoder : public Decoder {
 public:
  StripDecoder(uint32_t content, size_t start, size_t stop)
      : content_(content), start_(start), stop_(stop) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::vector<uint32_t> cps;
    std::vector<size_t> offs;
    for (std::string& t : tokens) {
      cps.clear();
      offs.clear();
      for (size_t i = 0; i < t.size();) {
        int len = 0;
        cps.push_back(decode_utf8(t.data() + i, &len));
        offs.push_back(i);
        i += len;
      }
      offs.push_back(t.size());
      size_t n = cps.size();
      size_t start_cut = 0;
      for (size_t i = 0; i < start_ && i < n; ++i) {
        if (cps[i] != content_) break;
        start_cut = i + 1;
      }
      size_t stop_cut = n;
      for (size_t i = 0; i < stop_ && i < n; ++i) {
        size_t index = n - i - 1;
        if (cps[index] != content_) break;
        stop_cut = index;
      }
      if (start_cut >= stop_cut) {
        t.clear();
      } else {
        t = t.substr(offs[start_cut], offs[stop_cut] - offs[start_cut]);
      }
    }
  }

 private:
  uint32_t content_;
  size_t start_, stop_;
};

class SequenceDecoder : public Decoder {
 public:
  explicit SequenceDecoder(std::vector<std::unique_ptr<Decoder>> steps)
      : steps_(std::move(steps)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (const auto& s : steps_) s->decode_chain(tokens);
  }

 private:
  std::vector<std::unique_ptr<Decoder>> steps_;
};

size_t size_field(const Json& j, const char* key, const std::string& where) {
  int64_t v = int_field(j, key, where);
  GDN_CHECK(v >= 0, where, ": field \"", key, "\" must not be negative");
  return static_cast<size_t>(v);
}

}  // namespace

std::unique_ptr<Decoder> parse_decoder(const Json& j, const std::string& path) {
  std::string type = type_field(j, "decoder", path);
  std::string where = path + ": decoder " + type;
  if (type == "ByteLevel") return std::make_unique<ByteLevelDecoder>();
  if (type == "Metaspace") {
    return std::make_unique<MetaspaceDecoder>(char_field(j, "replacement", where),
                                              parse_prepend_scheme(j, where));
  }
  if (type == "Replace") {
    return std::make_unique<ReplaceDecoder>(pattern_field(j, where),
                                            string_field(j, "content", where));
  }
  if (type == "ByteFallback") return std::make_unique<ByteFallbackDecoder>();
  if (type == "Fuse") return std::make_unique<FuseDecoder>();
  if (type == "Strip") {
    return std::make_unique<StripDecoder>(char_field(j, "content", where),
                                          size_field(j, "start", where),
                                          size_field(j, "stop", where));
  }
  if (type == "Sequence") {
    const Json& list = required_field(j, "decoders", where);
    GDN_CHECK(list.is_array(), where, ": \"decoders\" must be an array");
    std::vector<std::unique_ptr<Decoder>> steps;
    for (const Json& d : list) steps.push_back(parse_decoder(d, path));
    return std::make_unique<SequenceDecoder>(std::move(steps));
  }
  GDN_FAIL(path, ": unsupported decoder type \"", type,
           "\" (supported: ByteLevel, Metaspace, Replace, ByteFallback, Fuse, Strip, Sequence)");
}

}  // namespace gdn::data::tokjson
