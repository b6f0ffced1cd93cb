// Document packing (data.pack: documents): rows of seq_len + 1 tokens filled with whole
// documents, so the model trains on each document from its own start (fla's cu_seqlens).
//
// Documents end at the end-of-document token (the shard's last one may lack it). A document of
// more than seq_len + 1 tokens is split into pieces of seq_len + 1 tokens overlapping by one
// (piece i starts at i * seq_len), so no next-token pair is lost; pieces of one token teach
// nothing and are dropped. A full piece takes a row alone; the shorter ones (every document's
// last piece) are packed best-fit decreasing (longest first, ties in shard order: each goes to
// the row with the least room that holds it), and the room left over is padding. The rows are
// ordered by their first piece's place in the shard. The layout is a pure function of the shard
// and seq_len; training visits its rows in a seeded order per epoch (permuted_row), validation
// in layout order.
//
// A batch of packed rows (Batch::cu_seqlens) is fla's layout: the B rows of T inputs flattened
// into one row of B * T, with a boundary at the start of every piece and of every row's padding.
// The target of each piece's last input (a document's eos, whose target is the next document's
// first token) and of the padding is -100 (ignored), so no position predicts across a boundary;
// so is every target the shard's loss mask leaves unscored (a prompt token).
#pragma once
#include <cstdint>
#include <vector>

#include "src/data/shard.h"

namespace gdn::data {

struct PackedRows {
  int64_t row_tokens = 0;            // seq_len + 1
  int32_t pad_id = 0;                // the eos: fills the room a row's pieces leave
  std::vector<int64_t> piece_start;  // shard offset of each piece
  std::vector<int64_t> piece_len;    // its tokens, in [2, row_tokens]
  std::vector<int64_t> row_begin;    // num_rows + 1: row r holds pieces [row_begin[r], [r + 1])
  int64_t num_rows() const { return int64_t(row_begin.size()) - 1; }
  int64_t num_documents = 0;    // in the shard
  int64_t used_tokens() const;  // piece tokens over all rows (the rest is padding)
};

// The layout above for `shard` (scanned once for eos_id; needs seq_len >= 1 and one row).
PackedRows pack_documents(const Shard& shard, int32_t eos_id, int64_t seq_len);

// Row `index` of the training order: epoch index / num_rows visits every row once, in a
// permutation drawn from (seed, epoch) (a Feistel network over the row indices: no table).
int64_t permuted_row(int64_t index, int64_t num_rows, uint64_t seed);

// Writes row `row` into tokens[0, row_tokens) (padding = pad_id), its inputs' targets with the
// pieces' last inputs and the padding set to `ignore`, and appends its boundaries (offset
// `base` + each piece's start, and the padding's start, when below seq_len) to cu.
template <typename T>
void fill_packed_row(const Shard& shard, const PackedRows& rows, int64_t row, T* tokens, T* targets,
                     int64_t base, std::vector<int64_t>& cu, int64_t ignore = -100);

}  // namespace gdn::data
