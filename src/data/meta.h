// meta.json, the description of a prepared data directory: written by prepare_data, and read
// back by open_prepared, which checks it against the shards and the tokenizer beside it (the
// format, the shard version, the tokenizer's name, file, vocabulary and special ids, each
// shard's file, token count, vocabulary and token width), so shards and a meta.json from
// different preparations, or a hand-edited one, fail when opened, naming the file and the field.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "src/data/prepare.h"
#include "src/data/shard.h"
#include "src/data/tokenizer.h"

namespace gdn::data {

inline constexpr const char* kMetaFormat = "gdn token shards";

// meta.json's text for a finished preparation.
std::string meta_json_text(const PrepareSummary& s, const PrepareOptions& o, const Tokenizer& tok);

// A prepared data directory, checked.
struct PreparedData {
  std::string dir, meta_path;
  std::shared_ptr<const Shard> train, val;
  std::unique_ptr<Tokenizer> tokenizer;
  int64_t train_documents = 0, val_documents = 0;
  bool eos_appended = false;  // the tokenizer's eos ends every document (data.pack: documents)
  int64_t val_bytes = 0;      // text behind val.bin (0: unknown, e.g. a single document's tail)
  // Fine-tuning pairs: the shards carry loss masks (Shard::loss_mask), the loss scores completions.
  bool loss_masked() const { return train && train->loss_mask(); }
  // Text bytes per val token, for bits per byte (0 when unknown).
  // Unknown with a loss mask too: the loss covers only the scored tokens.
  double val_bytes_per_token() const {
    if (loss_masked()) return 0;
    return val_bytes > 0 && val->size() > 0 ? double(val_bytes) / double(val->size()) : 0;
  }
};

// Opens DIR's meta.json, shards and tokenizer and checks them against each other.
PreparedData open_prepared(const std::string& dir);

// Throws unless `val` holds one evaluation window (seq_len + 1 tokens); the message names the
// file and says how to get one (more val_fraction or more text), followed by `hint`.
void require_val_window(const Shard& val, int64_t seq_len, const std::string& hint = "");

}  // namespace gdn::data
