// Input expansion, plain and gzip byte streams, and the plain-text and JSON Lines document
// readers. JSON goes through nlohmann-json, which rejects ill-formed UTF-8; such bytes are
// mapped to stand-in code points before parsing and back after, so the byte tokenizer still
// sees them exactly.
#include "src/data/text_inputs.h"

#include <glob.h>
#include <zlib.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "src/core/error.h"

namespace gdn::data {

namespace fs = std::filesystem;

namespace {

constexpr size_t kReadChunk = size_t(1) << 20;
constexpr size_t kMaxSkippedReasons = 10;

std::string lower_name(const std::string& path) {
  std::string name = fs::path(path).filename().string();
  for (char& c : name) c = char(std::tolower(static_cast<unsigned char>(c)));
  return name;
}

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// The file name without a trailing ".gz", lower-cased.
std::string stem_name(const std::string& path) {
  std::string name = lower_name(path);
  if (ends_with(name, ".gz")) name.resize(name.size() - 3);
  return name;
}

// Ill-formed UTF-8 bytes b become U+10FF00 + b (Supplementary Private Use Area-B, encoded
// F4 8F BE|BF xx), which the JSON parser accepts; restore_bytes turns them back.
constexpr char kStandInLead[] = "\xF4\x8F";

// Whether `line` already holds a stand-in-range character (raw, or as the JSON escape of its
// high surrogate \udbff), which restore_bytes could not tell from a protected byte.
bool holds_stand_in_range(std::string_view line) {
  for (size_t i = 0; i + 2 < line.size(); ++i) {
    if (line[i] == kStandInLead[0] && line[i + 1] == kStandInLead[1] &&
        (uint8_t(line[i + 2]) == 0xBE || uint8_t(line[i + 2]) == 0xBF))
      return true;
    if (line[i] == '\\' && i + 5 < line.size() && (line[i + 1] == 'u' || line[i + 1] == 'U')) {
      std::string hex(line.substr(i + 2, 4));
      for (char& c : hex) c = char(std::tolower(static_cast<unsigned char>(c)));
      if (hex == "dbff") return true;
    }
  }
  return false;
}

// `line` with each byte of its ill-formed UTF-8 sequences replaced by its stand-in.
std::string protect_bytes(std::string_view line) {
  std::string out;
  out.reserve(line.size() + 16);
  for (size_t i = 0; i < line.size();) {
    bool complete;
    const size_t len = utf8_sequence_at(line, i, complete);
    if (complete) {
      out.append(line.substr(i, len));
    } else {
      for (size_t k = 0; k < len; ++k) {
        const auto b = uint8_t(line[i + k]);
        out += kStandInLead;
        out += char(b < 0xC0 ? 0xBE : 0xBF);
        out += char(0x80 | (b & 0x3F));
      }
    }
    i += len;
  }
  return out;
}

// The inverse of protect_bytes on a decoded string.
void restore_bytes(std::string& text) {
  size_t w = 0;
  for (size_t r = 0; r < text.size();) {
    if (r + 3 < text.size() && text[r] == kStandInLead[0] && text[r + 1] == kStandInLead[1] &&
        (uint8_t(text[r + 2]) == 0xBE || uint8_t(text[r + 2]) == 0xBF)) {
      text[w++] = char(0x80 | ((uint8_t(text[r + 2]) & 1) << 6) | (uint8_t(text[r + 3]) & 0x3F));
      r += 4;
    } else {
      text[w++] = text[r++];
    }
  }
  text.resize(w);
}

// nlohmann's parse message without its "[json.exception.parse_error.101] " prefix and the line
// number (always 1: one line is parsed at a time), the text it quotes ("last read: '...'", the
// rest of the line for an unclosed string) cut to an excerpt: errors never echo a whole line.
std::string parse_message(const nlohmann::json::parse_error& e) {
  std::string m = e.what();
  const size_t close = m.find("] ");
  if (m.rfind("[json.exception.", 0) == 0 && close != std::string::npos) m = m.substr(close + 2);
  const size_t at = m.find("at line 1, column ");
  if (at != std::string::npos) m.replace(at, 18, "at column ");
  constexpr size_t kExcerpt = 60;
  const size_t quote = m.find("last read: '");
  if (quote != std::string::npos) {
    const size_t from = quote + 12, to = m.rfind('\'');
    if (to != std::string::npos && to > from + 2 * kExcerpt)
      m.replace(from + kExcerpt, to - from - 2 * kExcerpt,
                str_cat("...(", to - from - 2 * kExcerpt, " bytes)..."));
  }
  return m;
}

bool blank(std::string_view line) {
  return std::all_of(line.begin(), line.end(),
                     [](char c) { return c == ' ' || c == '\t' || c == '\r'; });
}

}  // namespace

// ---- byte streams ----------------------------------------------------------------------------

// A file read as it is, or decompressed through zlib (NAME.gz). gzread reads a file that is not
// gzip as it is, so a misnamed file still works.
class ByteStream {
 public:
  explicit ByteStream(const std::string& path) : path_(path), gzip_(is_gzip_name(path)) {
    errno = 0;
    if (gzip_) {
      gz_ = ::gzopen(path.c_str(), "rb");
      GDN_CHECK(gz_, "cannot open '", path, "': ", errno ? std::strerror(errno) : "out of memory");
      ::gzbuffer(gz_, 1 << 18);
    } else {
      file_ = std::fopen(path.c_str(), "rb");
      GDN_CHECK(file_, "cannot open '", path, "': ", std::strerror(errno));
    }
  }
  ~ByteStream() {
    if (gz_) ::gzclose(gz_);
    if (file_) std::fclose(file_);
  }
  ByteStream(const ByteStream&) = delete;
  ByteStream& operator=(const ByteStream&) = delete;

  // Up to n bytes into buf; 0 at the end of the file. Throws on a read error or a corrupt or
  // truncated gzip stream, naming the file and the decompressed offset.
  size_t read(char* buf, size_t n) {
    n = std::min(n, kReadChunk);
    size_t got;
    if (gz_) {
      const int r = ::gzread(gz_, buf, unsigned(n));
      int err = Z_OK;
      const char* msg = r <= 0 ? ::gzerror(gz_, &err) : "";
      // A truncated stream reads as an early end (Z_BUF_ERROR), not as -1.
      GDN_CHECK(r >= 0 && err == Z_OK, "'", path_, "': gzip error after ", out_,
                " decompressed bytes: ", msg, err == Z_BUF_ERROR ? " (the file is truncated)" : "");
      got = size_t(r);
    } else {
      got = std::fread(buf, 1, n, file_);
      GDN_CHECK(got == n || !std::ferror(file_), "error reading '", path_, "' at byte offset ",
                out_ + int64_t(got), ": ", std::strerror(errno));
    }
    out_ += int64_t(got);
    return got;
  }
  // The rest of the file.
  std::string read_all() {
    std::string s;
    for (;;) {
      const size_t old = s.size();
      s.resize(old + kReadChunk);
      const size_t got = read(&s[old], kReadChunk);
      s.resize(old + got);
      if (got == 0) return s;
    }
  }
  int64_t raw_offset() const { return gz_ ? int64_t(::gzoffset(gz_)) : out_; }

 private:
  std::string path_;
  bool gzip_;
  gzFile gz_ = nullptr;
  std::FILE* file_ = nullptr;
  int64_t out_ = 0;  // bytes delivered
};

// ---- names and expansion ---------------------------------------------------------------------

bool is_gzip_name(const std::string& path) {
  return ends_with(lower_name(path), ".gz");
}

InputFormat input_format(const std::string& path) {
  return ends_with(stem_name(path), ".jsonl") ? InputFormat::jsonl : InputFormat::text;
}

bool is_json_name(const std::string& path) {
  return ends_with(stem_name(path), ".json");
}

std::vector<InputFile> expand_inputs_keyed(const std::vector<std::string>& inputs) {
  std::vector<InputFile> out;
  std::set<std::string> seen;
  auto add = [&](const std::string& p, const std::string& key) {
    if (seen.insert(p).second) out.push_back({p, key});
  };
  for (const auto& in : inputs) {
    std::vector<std::string> matches;
    std::error_code exists_ec;
    if (fs::exists(in, exists_ec)) {  // a literal path, even one with glob characters
      matches.push_back(in);
    } else {
      glob_t g{};
      const int rc = ::glob(in.c_str(), GLOB_TILDE | GLOB_BRACE, nullptr, &g);
      if (rc == 0)
        for (size_t i = 0; i < g.gl_pathc; ++i) matches.emplace_back(g.gl_pathv[i]);
      ::globfree(&g);
      GDN_CHECK(rc == 0 || rc == GLOB_NOMATCH, "glob('", in, "') failed (code ", rc, ")");
    }
    GDN_CHECK(!matches.empty(), "input '", in, "' matches no file");
    for (const auto& m : matches) {
      std::error_code ec;
      if (fs::is_directory(m, ec)) {
        std::vector<std::string> files;
        for (fs::recursive_directory_iterator it(m, ec), end; !ec && it != end; it.increment(ec))
          if (it->is_regular_file()) files.push_back(it->path().string());
        GDN_CHECK(!ec, "cannot walk '", m, "': ", ec.message());
        std::sort(files.begin(), files.end());
        for (const auto& f : files) add(f, fs::path(f).lexically_relative(m).string());
      } else if (fs::is_regular_file(m, ec)) {
        add(m, fs::path(m).filename().string());
      } else {
        // Named, never dropped: a dangling link, or a pipe or device that reads forever.
        std::error_code link_ec;
        GDN_CHECK(!fs::is_symlink(m, link_ec), "input '", m, "' is a symbolic link to '",
                  fs::read_symlink(m, link_ec).string(), "', which does not exist");
        GDN_FAIL("input '", m, "' is not a regular file or a directory (a pipe, socket or ",
                 "device): copy the text to a file");
      }
    }
  }
  return out;
}

std::vector<std::string> expand_inputs(const std::vector<std::string>& inputs) {
  std::vector<std::string> out;
  for (auto& f : expand_inputs_keyed(inputs)) out.push_back(std::move(f.path));
  return out;
}

// ---- documents -------------------------------------------------------------------------------

DocumentReader::DocumentReader(const std::string& path, const ReadOptions& options)
    : path_(path),
      options_(options),
      format_(input_format(path)),
      in_(std::make_unique<ByteStream>(path)) {
  GDN_CHECK(format_ == InputFormat::text || !options_.text_field.empty(), "'", path,
            "': JSON Lines need a text field name (", options_.text_field_hint(), ")");
}

DocumentReader::~DocumentReader() = default;

int64_t DocumentReader::raw_bytes_read() const {
  return in_->raw_offset();
}

bool DocumentReader::next(Document& doc) {
  if (format_ == InputFormat::text) {
    if (done_) return false;
    done_ = true;
    doc = Document{};
    doc.text = in_->read_all();
    doc.binary = std::memchr(doc.text.data(), 0, doc.text.size()) != nullptr;
    if (!doc.binary) doc.utf8 = repair_utf8(doc.text, options_.utf8);
    return true;
  }
  std::string_view line;
  int64_t offset;
  while (next_line(line, offset)) {
    if (blank(line)) continue;
    std::string why;
    if (parse_line(line, offset, doc, why)) return true;
    const std::string where = str_cat("'", path_, "' line ", line_, " (byte offset ", offset, ")");
    GDN_CHECK(options_.skip_bad_lines, where, ": ", why,
              "; or skip and count such lines: ", options_.skip_bad_lines_hint());
    ++lines_skipped_;
    if (skipped_.size() < kMaxSkippedReasons) skipped_.push_back(where + ": " + why);
  }
  return false;
}

bool DocumentReader::next_line(std::string_view& line, int64_t& offset) {
  for (;;) {
    const size_t nl = buf_.find('\n', std::max(pos_, searched_));
    if (nl != std::string::npos || (eof_ && pos_ < buf_.size())) {
      const size_t end = nl != std::string::npos ? nl : buf_.size();
      line = std::string_view(buf_).substr(pos_, end - pos_);
      offset = buf_offset_ + int64_t(pos_);
      pos_ = searched_ = std::min(end + 1, buf_.size());
      ++line_;
      return true;
    }
    if (eof_) return false;
    searched_ = buf_.size();
    // Drop the lines already returned, then append the next chunk.
    buf_.erase(0, pos_);
    buf_offset_ += int64_t(pos_);
    searched_ -= pos_;
    pos_ = 0;
    const size_t old = buf_.size();
    buf_.resize(old + kReadChunk);
    const size_t got = in_->read(&buf_[old], kReadChunk);
    buf_.resize(old + got);
    eof_ = got == 0;
  }
}

namespace {

// "a, b, c" (the first eight fields of an object) or "none".
std::string field_list(const nlohmann::json& j) {
  std::string keys;
  int listed = 0;
  for (auto& kv : j.items()) {
    if (listed++ == 8) {
      keys += ", ...";
      break;
    }
    keys += (keys.empty() ? "" : ", ") + kv.key();
  }
  return keys.empty() ? "none" : keys;
}

}  // namespace

bool DocumentReader::parse_line(std::string_view line, int64_t offset, Document& doc,
                                std::string& why) const {
  doc = Document{};
  doc.line = line_;
  doc.offset = offset;
  // Ill-formed UTF-8 anywhere in the line: protect its bytes (or, in the rare line that already
  // holds stand-in-range characters, replace them by U+FFFD before parsing).
  std::string copy;
  std::string_view json_text = line;
  Utf8Stats line_utf8;
  bool restore = false;
  line_utf8 = check_utf8(line);
  if (line_utf8.invalid_bytes > 0) {
    restore = !holds_stand_in_range(line);
    copy = restore ? protect_bytes(line) : std::string(line);
    if (!restore) line_utf8 = repair_utf8(copy, Utf8Policy::replace);
    json_text = copy;
  }
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(json_text);
  } catch (const nlohmann::json::parse_error& e) {
    why = "not valid JSON: " + parse_message(e);
    if (line_utf8.invalid_bytes > 0)
      why += str_cat(" (the line also holds invalid UTF-8 from byte offset ",
                     offset + line_utf8.first_offset, ")");
    return false;
  }
  const std::string& field = options_.text_field;
  if (!j.is_object()) {
    why = str_cat("expected a JSON object with a \"", field, "\" field, got ", j.type_name());
    return false;
  }
  // The strings a line holds: its text, or a fine-tuning pair's prompt and completion.
  const bool pair = j.contains(options_.completion_field);
  const std::vector<std::string> names =
      pair ? std::vector<std::string>{options_.prompt_field, options_.completion_field}
           : std::vector<std::string>{field};
  std::vector<std::string> parts;
  for (const std::string& name : names) {
    auto it = j.find(name);
    if (it == j.end()) {
      why = str_cat("no \"", name, "\" field (its fields: ", field_list(j), "; ",
                    pair ? options_.pair_fields_hint() : options_.text_field_hint(),
                    pair ? " name a pair's fields" : " picks another",
                    pair ? ""
                         : str_cat("; a fine-tuning pair has \"", options_.prompt_field,
                                   "\" and \"", options_.completion_field, "\""),
                    ")");
      return false;
    }
    if (!it->is_string()) {
      why = str_cat("field \"", name, "\" is ", it->type_name(), ", not a string");
      return false;
    }
    parts.push_back(std::move(it->get_ref<std::string&>()));
  }
  // The UTF-8 policy applies to each part, so a pair's seam stays where its prompt ends.
  if (line_utf8.invalid_bytes > 0) {
    if (restore) {
      for (std::string& part : parts) {
        restore_bytes(part);
        const Utf8Stats u = repair_utf8(part, options_.utf8);
        if (doc.utf8.first_offset < 0) doc.utf8.first_offset = u.first_offset;
        doc.utf8.invalid_bytes += u.invalid_bytes;
        doc.utf8.replacements += u.replacements;
      }
    } else {
      doc.utf8 = line_utf8;  // replaced before parsing (counted over the whole line)
    }
    // Where the user can find it: the line's first invalid byte (JSON hides the field's position).
    if (doc.utf8.invalid_bytes > 0) doc.utf8.first_offset = offset + line_utf8.first_offset;
  }
  if (pair) doc.prompt_bytes = int64_t(parts[0].size());
  doc.text = std::move(parts[0]);
  if (pair) doc.text += parts[1];
  return true;
}

}  // namespace gdn::data
