// Text inputs of prepare_data: the files an input names (a file, a directory walked
// recursively, or a glob(3) pattern) and the documents each holds. A file's format comes from
// its name (case-insensitive):
//   NAME.jsonl, NAME.jsonl.gz  JSON Lines, what Hugging Face datasets' to_json writes: one
//                              document per line, the string in field `text_field` (other fields
//                              are ignored); blank lines are skipped. A line with a
//                              `completion_field` is a fine-tuning pair instead: the strings of
//                              `prompt_field` and `completion_field`, the document their
//                              concatenation with Document::prompt_bytes marking the seam
//   anything else              plain text: the whole file is one document (NAME.gz is
//                              decompressed first)
// gzip goes through zlib. A JSONL line that is not valid JSON, not an object, lacks the field or
// holds something other than a string there is an error naming the file, the line and its byte
// offset; with skip_bad_lines it is skipped and counted instead (the first reasons are kept).
// Ill-formed UTF-8 is kept or replaced by U+FFFD (utf8.h), also inside JSON strings, and each
// Document reports what it held and where: the byte offset in the decompressed file and, for
// JSON Lines, the line.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "src/data/utf8.h"

namespace gdn::data {

struct InputFile {
  std::string path;
  std::string key;  // split key: the path below the directory input it was found under, or
                    // the file name of a file named (or globbed) directly
};

// Expands each input (glob(3) pattern, file or directory walked recursively), in order, without
// duplicates; each directory's files sorted. Throws naming an input that matches nothing.
std::vector<InputFile> expand_inputs_keyed(const std::vector<std::string>& inputs);
std::vector<std::string> expand_inputs(const std::vector<std::string>& inputs);

enum class InputFormat { text, jsonl };
InputFormat input_format(const std::string& path);
bool is_gzip_name(const std::string& path);  // NAME.gz: read through zlib
// NAME.json or NAME.json.gz: read as plain text (worth a hint: JSON Lines must be NAME.jsonl).
bool is_json_name(const std::string& path);

struct ReadOptions {
  std::string text_field = "text";  // JSON Lines: the field holding the document
  std::string prompt_field = "prompt", completion_field = "completion";  // a fine-tuning pair
  Utf8Policy utf8 = Utf8Policy::keep;
  bool skip_bad_lines = false;   // JSON Lines: skip and count bad lines instead of failing
  bool from_run_config = false;  // hints name data.* config keys (gdn train), not the flags

  // How to set each option, for hints: the config key under gdn train, else the flag.
  const char* text_field_hint() const {
    return from_run_config ? "data.text_field" : "--text-field";
  }
  const char* pair_fields_hint() const {
    return from_run_config ? "data.prompt_field and data.completion_field"
                           : "--prompt-field and --completion-field";
  }
  const char* skip_bad_lines_hint() const {
    return from_run_config ? "data.skip_bad_lines: true" : "gdn prepare-data --skip-bad-lines";
  }
};

struct Document {
  int64_t line = 0;    // JSON Lines: the 1-based line number; plain text: 0
  int64_t offset = 0;  // byte offset of the document (JSON Lines: its line) in the file
                       // (decompressed)
  std::string text;    // after the UTF-8 policy
  // A prompt/completion pair: text = prompt + completion, the prompt its first prompt_bytes
  // bytes (after the UTF-8 policy); -1: a plain document.
  int64_t prompt_bytes = -1;
  bool binary = false;  // plain text holding a NUL byte (its UTF-8 left unchecked)
  Utf8Stats utf8;       // first_offset: in the decompressed file (JSON Lines: the first
                        // invalid byte of the line)
};

class ByteStream;

// The documents of one file, in order.
class DocumentReader {
 public:
  DocumentReader(const std::string& path, const ReadOptions& options);
  ~DocumentReader();
  DocumentReader(const DocumentReader&) = delete;
  DocumentReader& operator=(const DocumentReader&) = delete;

  // The next document; false at the end of the file. Throws on a read or gzip error and on a
  // bad JSON line (unless skip_bad_lines), naming the file, the line and the byte offset.
  bool next(Document& doc);
  InputFormat format() const { return format_; }
  int64_t raw_bytes_read() const;  // of the file on disk (compressed for gzip): progress
  int64_t lines_skipped() const { return lines_skipped_; }
  // The reasons of the first skipped lines: "'FILE' line N (byte offset B): why".
  const std::vector<std::string>& skipped() const { return skipped_; }

 private:
  bool next_line(std::string_view& line, int64_t& offset);
  bool parse_line(std::string_view line, int64_t offset, Document& doc, std::string& why) const;

  std::string path_;
  ReadOptions options_;
  InputFormat format_;
  std::unique_ptr<ByteStream> in_;
  std::string buf_;  // JSON Lines: bytes read, not yet split into lines, from buf_[pos_]
  size_t pos_ = 0, searched_ = 0;
  int64_t buf_offset_ = 0;  // file offset of buf_[0]
  int64_t line_ = 0;
  bool eof_ = false, done_ = false;
  int64_t lines_skipped_ = 0;
  std::vector<std::string> skipped_;
};

}  // namespace gdn::data
