// prepare_data: text inputs -> tokenizer + token shards, the library side of `gdn prepare-data`.
//
// Writes into out_dir: train.bin and val.bin (token shards, see shard.h), the tokenizer
// (tokenizer.json for byte, tokenizer.model for sentencepiece) and meta.json, each through a
// temporary file (io::temp_path_for); the temporary files an interrupted preparation left there are
// removed first. Inputs are plain text (a file is a document) or JSON Lines (a line is a
// document), gzip-compressed or not (text_inputs.h). Plain-text files with a NUL byte (binary)
// and empty documents are skipped and counted. Ill-formed UTF-8 is kept as bytes by the byte
// tokenizer and replaced by U+FFFD for SentencePiece; either way the summary counts it and names
// the first files with their first byte offsets (and lines). The split is by documents: they are
// ranked by a hash of their key (the path below the input they were found under, or a file named
// directly: its name; a JSON Lines document adds ":LINE"), so a document's side depends neither
// on which other files are there nor on where the corpus lives, and taken into val in that order
// while val stays within val_fraction of the bytes (at least one document when val_fraction >
// 0). A corpus of a single document is split instead at a contiguous tail of its tokens. When
// the tokenizer has an eos id it is appended after every document.
//
// Fine-tuning pairs (JSON Lines with prompt and completion fields, text_inputs.h) are tokenized
// as the prompt's ids then the completion's, then the eos. When the corpus holds one, a loss mask
// is written beside each shard (train.mask.bin, val.mask.bin; shard.h): 0 for a prompt's tokens,
// 1 for a completion's, its eos, and every token of a plain document. Training and evaluation
// then score only the flagged targets (the loaders set the others to -100).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "src/data/text_inputs.h"
#include "src/data/tokenizer.h"
#include "src/data/tokenizer_file.h"

namespace gdn::data {

struct PrepareOptions {
  std::vector<std::string> inputs;  // files, directories (walked) or glob(3) patterns;
                                    // empty: the default corpus (corpus.h)
  // byte, sentencepiece (trained on the corpus) or the path of a tokenizer (tokenizer_file.h)
  std::string tokenizer = "byte";
  SpecialTokens specials;  // a tokenizer.json's bos and eos (--bos, --eos)
  int64_t vocab_size = 0;  // 0: 256 (byte) or 8192 (sentencepiece); byte 258 adds bos/eos;
                           // a tokenizer file: 0 or its vocabulary size
  std::string out_dir;
  std::string text_field = "text";  // JSON Lines: the field holding each document
  std::string prompt_field = "prompt", completion_field = "completion";  // fine-tuning pairs
  bool skip_bad_lines = false;  // JSON Lines: skip and count bad lines instead of failing
  double val_fraction = 0.05;
  int64_t max_bytes = 0;  // stop reading after this much text (0: no limit)
  bool append_eos = true;
  std::string sp_model_type = "bpe";  // "bpe" or "unigram"
  bool sp_byte_fallback = true;
  int64_t sp_sample_bytes = int64_t(32) << 20;  // SentencePiece trains on about this much text
  uint64_t seed = 0;                            // of the SentencePiece training sample
  int threads = 0;                              // 0: all hardware threads
  bool progress = true;                         // progress lines on stderr
  bool from_run_config = false;  // hints name data.* config keys, not prepare-data's flags
};

// A file with ill-formed UTF-8: where the first invalid byte is, how much there was.
struct Utf8FileReport {
  std::string file;
  int64_t offset = 0;  // byte offset of the first invalid byte (decompressed)
  int64_t line = 0;    // JSON Lines: its line (0: plain text)
  int64_t documents = 0, bytes = 0;
};

struct PrepareSummary {
  std::string tokenizer;
  std::string tokenizer_hash;  // a tokenizer file's content hash (io::content_hash)
  int64_t vocab_size = 0;
  int64_t files_found = 0, files_used = 0, files_truncated = 0;
  int64_t files_jsonl = 0, files_text = 0;  // found, by format
  int64_t files_json_as_text = 0;           // NAME.json read as plain text (not JSON Lines)
  int64_t files_skipped_binary = 0, files_skipped_empty = 0;
  int64_t files_skipped_max_bytes = 0;       // not read: the byte budget was spent
  int64_t documents = 0;                     // used
  int64_t pair_documents = 0;                // of them, prompt/completion pairs (a loss mask)
  int64_t train_scored = 0, val_scored = 0;  // tokens the loss mask flags (pairs only)
  int64_t documents_skipped_empty = 0;       // JSON Lines records with an empty text
  int64_t lines_skipped = 0;                 // bad JSON lines (skip_bad_lines)
  std::vector<std::string> skipped_lines;    // the first reasons, "'FILE' line N (...): why"
  // Ill-formed UTF-8 in the documents used: kept (byte) or replaced by U+FFFD (sentencepiece).
  std::string utf8_handling;  // "kept" or "replaced"
  int64_t utf8_files = 0, utf8_documents = 0, utf8_bytes = 0, utf8_replacements = 0;
  std::vector<Utf8FileReport> utf8_first;       // the first files, in input order
  std::vector<std::string> temp_files_removed;  // left by an interrupted preparation
  int64_t bytes = 0;                            // text bytes tokenized
  int64_t train_docs = 0, val_docs = 0, train_bytes = 0, val_bytes = 0;
  int64_t train_tokens = 0, val_tokens = 0;
  int64_t sp_sample_bytes = 0;  // text the SentencePiece model was trained on
  std::string split;            // how val was chosen, in words
  double seconds = 0;
  std::string out_dir, train_path, val_path, tokenizer_path, meta_path;
  std::string train_mask_path, val_mask_path;  // empty: no pairs, no loss mask
};

// The names prepare_data writes into out_dir (and whose temporary files it removes).
std::vector<std::string> prepared_file_names();

PrepareSummary prepare_data(const PrepareOptions& options);

// A few human-readable lines.
std::string format_summary(const PrepareSummary& s);

}  // namespace gdn::data
