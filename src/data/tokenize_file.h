// `gdn tokenize`: a JSON Lines file through a tokenizer, line for line.
//   encode: {"text": "...", ...}  ->  {"ids": [...]}
//   decode: {"ids": [...], ...}   ->  {"text": "..."}
// Output line i is input line i (a blank line stays blank). Blocks of lines are parsed and
// tokenized on all threads and written in order to a temporary file, renamed over the output
// when every line succeeded: an error (which names the file and line) leaves no partial output.
#pragma once
#include <cstdint>
#include <string>

#include "src/data/tokenizer.h"

namespace gdn::data {

struct TokenizeFileOptions {
  std::string input, out;
  std::string text_field = "text";  // encode: the field holding each line's text
  bool decode = false;
  int threads = 0;  // 0: all hardware threads
};

struct TokenizeFileSummary {
  int64_t lines = 0, tokens = 0, bytes = 0;  // bytes: of the text encoded or decoded
  double seconds = 0;
};

TokenizeFileSummary tokenize_jsonl(const Tokenizer& tok, const TokenizeFileOptions& o);

}  // namespace gdn::data
