// Normalizers of tokenizer.json: Unicode forms through ICU, the others by hand.
#include "src/data/tokenizer_json_normalize.h"

#include <unicode/bytestream.h>
#include <unicode/normalizer2.h>
#include <unicode/uniset.h>

#include <vector>

#include "src/data/tokenizer_json_fields.h"

namespace gdn::data::tokjson {

namespace {

bool is_ascii(std::string_view s) {
  for (char c : s)
    if (static_cast<unsigned char>(c) >= 0x80) return false;
  return true;
}

// NFC / NFKC through ICU's UTF-8 API, restricted to the characters of Unicode 9.0: the library
// normalizes with the unicode-normalization-alignments crate, whose data is Unicode 9.0 (marks
// added since have combining class 0 and no mappings there: checked against tokenizers 0.23.3
// over every code point), so newer characters are left as they are and split the text into
// parts normalized on their own, as ICU's FilteredNormalizer2 does. ASCII text is its own form.
class UnicodeForm : public Normalizer {
 public:
  UnicodeForm(bool compat, const std::string& where) {
    UErrorCode err = U_ZERO_ERROR;
    const icu::Normalizer2* base =
        compat ? icu::Normalizer2::getNFKCInstance(err) : icu::Normalizer2::getNFCInstance(err);
    GDN_CHECK(U_SUCCESS(err) && base, where, ": ICU normalizer unavailable: ", u_errorName(err));
    unicode9_ = std::make_unique<icu::UnicodeSet>(icu::UnicodeString(u"[:age=9.0:]"), err);
    GDN_CHECK(U_SUCCESS(err), where, ": ICU has no Unicode 9.0 age set: ", u_errorName(err));
    unicode9_->freeze();
    filtered_ = std::make_unique<icu::FilteredNormalizer2>(*base, *unicode9_);
    form_ = filtered_.get();
  }
  void normalize(std::string_view in, std::string& out, uint32_t& head0) const override {
    out.clear();
    if (is_ascii(in)) {
      out.assign(in.data(), in.size());
      return;
    }
    run(in, out);
    if (head0 > 0 && !out.empty()) {
      // The output characters that come from the first input character keep its offset 0.
      int len = 0;
      decode_utf8(in.data(), &len);
      std::string first;
      run(in.substr(0, len), first);
      int out_len = 0;
      decode_utf8(out.data(), &out_len);
      head0 = out.compare(0, first.size(), first) == 0 && !first.empty()
                  ? static_cast<uint32_t>(first.size())
                  : static_cast<uint32_t>(out_len);
    }
  }

 private:
  void run(std::string_view in, std::string& out) const {
    icu::StringByteSink<std::string> sink(&out);
    UErrorCode err = U_ZERO_ERROR;
    form_->normalizeUTF8(0, icu::StringPiece(in.data(), static_cast<int32_t>(in.size())), sink,
                         nullptr, err);
    GDN_CHECK(U_SUCCESS(err), "ICU normalization failed: ", u_errorName(err));
  }
  std::unique_ptr<icu::UnicodeSet> unicode9_;
  std::unique_ptr<icu::FilteredNormalizer2> filtered_;
  const icu::Normalizer2* form_ = nullptr;
};

class Lowercase : public Normalizer {
 public:
  void normalize(std::string_view in, std::string& out, uint32_t& head0) const override {
    out.clear();
    out.reserve(in.size());
    uint32_t new_head0 = 0;
    for (size_t i = 0; i < in.size();) {
      int len = 0;
      uint32_t cp = decode_utf8(in.data() + i, &len);
      size_t before = out.size();
      append_lowercase(out, cp);
      if (i < head0) new_head0 += static_cast<uint32_t>(out.size() - before);
      i += len;
    }
    head0 = new_head0;
  }
};

class Prepend : public Normalizer {
 public:
  explicit Prepend(std::string s) : s_(std::move(s)) {}
  void normalize(std::string_view in, std::string& out, uint32_t& head0) const override {
    out.clear();
    if (in.empty()) return;
    out.reserve(s_.size() + in.size());
    out += s_;
    out.append(in.data(), in.size());
    if (head0 > 0) head0 += static_cast<uint32_t>(s_.size());
  }

 private:
  std::string s_;
};

class Replace : public Normalizer {
 public:
  Replace(std::unique_ptr<Regex> pattern, std::string content)
      : pattern_(std::move(pattern)), content_(std::move(content)) {}
  void normalize(std::string_view in, std::string& out, uint32_t& head0) const override {
    out.clear();
    out.reserve(in.size());
    // New characters take the alignment of the last replaced byte (the library's
    // NormalizedString::replace), so they stand for offset 0 when that byte did.
    uint32_t new_head0 = 0;
    bool counting = true;
    size_t last_end = 0;
    auto copy = [&](size_t a, size_t b) {
      out.append(in.data() + a, b - a);
      if (counting) {
        if (b <= head0) {
          new_head0 += static_cast<uint32_t>(b - a);
        } else {
          if (a < head0) new_head0 += static_cast<uint32_t>(head0 - a);
          if (b > a) counting = false;
        }
      }
    };
    pattern_->for_each_match(in, [&](size_t s, size_t e) {
      copy(last_end, s);
      out += content_;
      if (counting) {
        if (e == 0 || e - 1 < head0) {
          new_head0 += static_cast<uint32_t>(content_.size());
        } else if (!content_.empty()) {
          counting = false;
        }
      }
      last_end = e;
    });
    copy(last_end, in.size());
    head0 = new_head0;
  }

 private:
  std::unique_ptr<Regex> pattern_;
  std::string content_;
};

class Sequence : public Normalizer {
 public:
  explicit Sequence(std::vector<std::unique_ptr<Normalizer>> steps) : steps_(std::move(steps)) {}
  void normalize(std::string_view in, std::string& out, uint32_t& head0) const override {
    if (steps_.empty()) {
      out.assign(in.data(), in.size());
      return;
    }
    std::string tmp;
    std::string* src = &tmp;
    std::string* dst = &out;
    // The last step must write into `out`: alternate so that it does.
    if (steps_.size() % 2 == 0) std::swap(src, dst);
    steps_[0]->normalize(in, *dst, head0);
    for (size_t k = 1; k < steps_.size(); ++k) {
      std::swap(src, dst);
      steps_[k]->normalize(*src, *dst, head0);
    }
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> steps_;
};

}  // namespace

std::unique_ptr<Normalizer> parse_normalizer(const Json& j, const std::string& path) {
  std::string type = type_field(j, "normalizer", path);
  std::string where = path + ": normalizer " + type;
  if (type == "NFC") return std::make_unique<UnicodeForm>(false, where);
  if (type == "NFKC") return std::make_unique<UnicodeForm>(true, where);
  if (type == "Lowercase") return std::make_unique<Lowercase>();
  if (type == "Prepend") return std::make_unique<Prepend>(string_field(j, "prepend", where));
  if (type == "Replace") {
    return std::make_unique<Replace>(pattern_field(j, where), string_field(j, "content", where));
  }
  if (type == "Sequence") {
    const Json& list = required_field(j, "normalizers", where);
    GDN_CHECK(list.is_array(), where, ": \"normalizers\" must be an array");
    std::vector<std::unique_ptr<Normalizer>> steps;
    for (const Json& n : list) steps.push_back(parse_normalizer(n, path));
    return std::make_unique<Sequence>(std::move(steps));
  }
  GDN_FAIL(path, ": unsupported normalizer type \"", type,
           "\" (supported: NFC, NFKC, Lowercase, Prepend, Replace, Sequence)");
}

}  // namespace gdn::data::tokjson
