// Host-side launch arithmetic of the CUDA kernels: block sizes, grids, the fixed row split of the
// deterministic two-pass column sums, the vocabulary tiles of the embedding backward, and the
// GEMM batches of the gated delta rule with grouped value heads. A plain header (no CUDA): every
// function here depends only on the problem sizes (so the same input gives the same reduction
// order, run after run) and is tested on the CPU (tests/test_gemm_mapping.cpp).
#pragma once
#include <cstdint>
#include <vector>

namespace gdn::cuda {

inline int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

// Threads of a one-block-per-row kernel over rows of length d: a power of two in [32, 256], the
// smallest that covers d (tree reductions need a power of two).
inline int row_threads(int64_t d) {
  int t = 32;
  while (t < 256 && t < d) t *= 2;
  return t;
}

// Blocks of a grid-stride loop over n items, `threads` per block: at least 1, at most 2^20.
inline unsigned grid_1d(int64_t n, int threads) {
  const int64_t blocks = ceil_div(n, threads);
  return unsigned(blocks < 1 ? 1 : (blocks > (int64_t(1) << 20) ? (int64_t(1) << 20) : blocks));
}

// Blocks of a one-block-per-row kernel (rows beyond the grid are looped over).
inline unsigned grid_rows(int64_t rows) {
  return unsigned(rows < 1 ? 1 : (rows > 65535 * 16 ? 65535 * 16 : rows));
}

// Column sums over n rows in two passes (pass 1: each part of the rows -> one partial row; pass 2:
// the partials added in part order): at most kMaxParts parts of rows_per_part consecutive rows
// (the last may be shorter). Depends on n only, so the order of every sum is fixed.
struct RowSplit {
  int64_t parts = 0, rows_per_part = 0;
};
constexpr int64_t kMaxParts = 256;
inline RowSplit split_rows(int64_t n) {
  RowSplit s;
  s.rows_per_part = ceil_div(n, kMaxParts);
  if (s.rows_per_part < 32) s.rows_per_part = 32;
  s.parts = n > 0 ? ceil_div(n, s.rows_per_part) : 0;
  return s;
}

// Embedding backward: each block owns this many consecutive vocabulary rows (and all columns)
// and scans every token in order, so each dweight row is summed in token order by one thread per
// column: at most ~512 blocks, at least 16 rows each.
inline int64_t embedding_rows_per_block(int64_t v) {
  const int64_t r = ceil_div(v, 512);
  return r < 16 ? 16 : r;
}

// The gated delta rule's chunk tiles are indexed value tile i = s * NT + c (value slice
// s = b * HV + hv, chunk c) and key tile ks * NT + c (key slice ks = b * H + h). With G = HV / H
// value heads per key head, s = ks * G + j (hv = h * G + j). A GEMM over every value tile whose
// operands include a key tile is issued as strided batches: batch n of `count` GEMMs uses value
// tile value_first + n * value_step and key tile key_first + n * key_step.
struct ChunkBatch {
  int64_t value_first = 0, value_step = 0, key_first = 0, key_step = 0, count = 0;
};

// The batches covering every value tile exactly once (key_slices = B * H, chunks = NT); as few
// as possible: one when G == 1, else G * min(NT, key_slices).
inline std::vector<ChunkBatch> chunk_batches(int64_t key_slices, int64_t group, int64_t chunks) {
  std::vector<ChunkBatch> out;
  if (group == 1) {
    out.push_back({0, 1, 0, 1, key_slices * chunks});
    return out;
  }
  for (int64_t j = 0; j < group; ++j) {
    if (chunks <= key_slices) {  // one batch per (j, c), over the key slices
      for (int64_t c = 0; c < chunks; ++c)
        out.push_back({j * chunks + c, group * chunks, c, chunks, key_slices});
    } else {  // one batch per (j, key slice), over the chunks
      for (int64_t ks = 0; ks < key_slices; ++ks)
        out.push_back({(ks * group + j) * chunks, 1, ks * chunks, 1, chunks});
    }
  }
  return out;
}

}  // namespace gdn::cuda
