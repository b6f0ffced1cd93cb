// `gdn tokenize` (tokenize_file.h).
#include "src/data/tokenize_file.h"

#include <charconv>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "src/core/error.h"
#include "src/io/atomic_file.h"

namespace gdn::data {

namespace {

using nlohmann::json;

constexpr size_t kBlockLines = 1 << 14;
constexpr size_t kBlockBytes = size_t(16) << 20;

// One input line's result: its output line, or why it failed.
struct LineResult {
  std::string out, error;
  int64_t tokens = 0, bytes = 0;
};

void append_ids(const std::vector<int32_t>& ids, std::string& out) {
  out += "{\"ids\": [";
  char buf[16];
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) out += ", ";
    const auto end = std::to_chars(buf, buf + sizeof buf, ids[i]).ptr;
    out.append(buf, end);
  }
  out += "]}";
}

LineResult encode_line(const Tokenizer& tok, const std::string& line, const std::string& field) {
  LineResult r;
  const json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) {
    r.error = j.is_discarded() ? "not valid JSON" : "not a JSON object";
    return r;
  }
  const auto text = j.find(field);
  if (text == j.end() || !text->is_string()) {
    r.error = "no string field \"" + field + "\" (--text-field)";
    return r;
  }
  const std::string& s = text->get_ref<const std::string&>();
  std::vector<int32_t> ids;
  tok.encode_append(s, ids);
  append_ids(ids, r.out);
  r.tokens = int64_t(ids.size());
  r.bytes = int64_t(s.size());
  return r;
}

LineResult decode_line(const Tokenizer& tok, const std::string& line) {
  LineResult r;
  const json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
  const auto ids = j.is_object() ? j.find("ids") : j.end();
  if (!j.is_object() || ids == j.end() || !ids->is_array()) {
    r.error = j.is_discarded() ? "not valid JSON" : "no array field \"ids\"";
    return r;
  }
  std::vector<int32_t> v;
  for (const json& id : *ids) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= tok.vocab_size()) {
      r.error = "id " + id.dump() + " is not in [0, " + std::to_string(tok.vocab_size()) + ")";
      return r;
    }
    v.push_back(id.get<int32_t>());
  }
  const std::string text = tok.decode(v);
  // A decoder may leave ill-formed UTF-8 (a byte-level id cut off mid-character): U+FFFD.
  r.out = json({{"text", text}}).dump(-1, ' ', false, json::error_handler_t::replace);
  r.tokens = int64_t(v.size());
  r.bytes = int64_t(text.size());
  return r;
}

}  // namespace

TokenizeFileSummary tokenize_jsonl(const Tokenizer& tok, const TokenizeFileOptions& o) {
  const auto t0 = std::chrono::steady_clock::now();
  std::ifstream in(o.input, std::ios::binary);
  GDN_CHECK(in, "cannot open '", o.input, "' (--input)");
  GDN_CHECK(!std::filesystem::is_directory(o.input), "'", o.input,
            "' (--input) is a directory; give a JSON Lines file");
  const std::string tmp = io::temp_path_for(o.out);
  std::FILE* out = std::fopen(tmp.c_str(), "wb");
  GDN_CHECK(out, "cannot create '", tmp, "' (for --out ", o.out, ")");
  const int threads =
      o.threads > 0 ? o.threads : int(std::max(1u, std::thread::hardware_concurrency()));
  TokenizeFileSummary s;
  std::vector<std::string> lines;
  std::vector<LineResult> results;
  std::string line;
  try {
    bool more = true;
    while (more) {
      lines.clear();
      size_t bytes = 0;
      while (lines.size() < kBlockLines && bytes < kBlockBytes &&
             (more = bool(std::getline(in, line)))) {
        bytes += line.size();
        lines.push_back(std::move(line));
      }
      results.assign(lines.size(), LineResult{});
#pragma omp parallel for schedule(dynamic, 16) num_threads(threads)
      for (size_t i = 0; i < lines.size(); ++i) {
        if (lines[i].find_first_not_of(" \t\r") == std::string::npos) continue;  // blank
        try {
          results[i] =
              o.decode ? decode_line(tok, lines[i]) : encode_line(tok, lines[i], o.text_field);
        } catch (const std::exception& e) {
          results[i].error = e.what();
        }
      }
      for (size_t i = 0; i < results.size(); ++i) {
        const LineResult& r = results[i];
        GDN_CHECK(r.error.empty(), o.input, " line ", s.lines + 1, ": ", r.error);
        ++s.lines;
        s.tokens += r.tokens;
        s.bytes += r.bytes;
        GDN_CHECK(std::fwrite(r.out.data(), 1, r.out.size(), out) == r.out.size() &&
                      std::fputc('\n', out) != EOF,
                  "writing '", tmp, "' failed (disk full?)");
      }
    }
    GDN_CHECK(in.eof(), "reading '", o.input, "' failed after line ", s.lines);
    GDN_CHECK(std::fflush(out) == 0 && std::fclose(out) == 0, "writing '", tmp, "' failed");
    out = nullptr;
    std::filesystem::rename(tmp, o.out);
  } catch (...) {
    if (out) std::fclose(out);
    std::remove(tmp.c_str());
    throw;
  }
  s.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return s;
}

}  // namespace gdn::data
