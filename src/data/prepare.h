// prepare_data: text files -> tokenizer + token shards, the library side of `gdn prepare-data`.
//
// Writes into out_dir: train.bin and val.bin (token shards, see shard.h), the tokenizer
// (tokenizer.json for byte, tokenizer.model for sentencepiece) and meta.json.
// A document is one file. Files with a NUL byte (binary), invalid UTF-8, or nothing in them are
// skipped and counted. The split is by documents: they are ranked by a hash of their path below
// the input they were found under (a file named directly: its name), so a file's side depends
// neither on which other files are there nor on where the corpus lives, and taken into val in that
// order while val stays within val_fraction of the bytes (at least one document when val_fraction >
// 0). A corpus of a single document is split instead at a contiguous tail of its tokens. When the
// tokenizer has an eos id it is appended after every document.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "src/data/tokenizer.h"

namespace gdn::data {

struct PrepareOptions {
  std::vector<std::string> inputs;  // files, directories (walked) or glob(3) patterns;
                                    // empty: the default corpus (corpus.h)
  TokenizerKind tokenizer = TokenizerKind::byte;
  int64_t vocab_size = 0;  // 0: 256 (byte) or 8192 (sentencepiece); byte 258 adds bos/eos
  std::string out_dir;
  double val_fraction = 0.05;
  int64_t max_bytes = 0;  // stop reading after this much text (0: no limit)
  bool append_eos = true;
  std::string sp_model_type = "bpe";  // "bpe" or "unigram"
  bool sp_byte_fallback = true;
  int64_t sp_sample_bytes = int64_t(32) << 20;  // SentencePiece trains on about this much text
  uint64_t seed = 0;                            // of the SentencePiece training sample
  int threads = 0;                              // 0: all hardware threads
  bool progress = true;                         // progress lines on stderr
};

struct PrepareSummary {
  std::string tokenizer;
  int64_t vocab_size = 0;
  int64_t files_found = 0, files_used = 0, files_truncated = 0;
  int64_t files_skipped_binary = 0, files_skipped_utf8 = 0, files_skipped_empty = 0;
  int64_t files_skipped_max_bytes = 0;  // not read: the byte budget was spent
  int64_t bytes = 0;                    // text bytes tokenized
  int64_t train_docs = 0, val_docs = 0, train_bytes = 0, val_bytes = 0;
  int64_t train_tokens = 0, val_tokens = 0;
  int64_t sp_sample_bytes = 0;  // text the SentencePiece model was trained on
  std::string split;            // how val was chosen, in words
  double seconds = 0;
  std::string out_dir, train_path, val_path, tokenizer_path, meta_path;
};

// Expands each input (glob(3) pattern, file or directory walked recursively), in order, without
// duplicates; each directory's files sorted. Throws naming a pattern that matches nothing.
std::vector<std::string> expand_inputs(const std::vector<std::string>& inputs);
// The same files with their split keys: the path below the directory input it was found under,
// or the file name of a file named (or globbed) directly.
struct InputFile {
  std::string path, key;
};
std::vector<InputFile> expand_inputs_keyed(const std::vector<std::string>& inputs);

PrepareSummary prepare_data(const PrepareOptions& options);

// A few human-readable lines.
std::string format_summary(const PrepareSummary& s);

}  // namespace gdn::data
