// The CUDA attention kernels' plan (kernels/cuda/attention.cu): tile size, threads, the shared
// memory layout, the tile table and the visibility ranges. Plain C++ (host and device), so the CPU
// tests check the plan and the index math the kernels use.
//
// One tile size `bt` serves every kernel: the forward's query and key tiles, the backward's key
// tiles (dK/dV kernel) and query tiles (dQ kernel). Tiles are aligned to their sequence's start,
// so a tile never holds two sequences. The kernels keep four [bt, D] tiles (padded rows of D + 1
// accumulator elements: threads reading down a column do not hit one bank) and two [bt, bt] score
// tiles (rows padded to bt + 1) in shared memory, plus 2 bt row statistics; each thread holds
// bt D / kThreads accumulator elements per output (at most kMaxPerThread) in registers.
// bt is the largest of 64, 32, 16, 8, 4 that fits both limits, so the shared memory stays within
// 48 KB (no opt-in needed) for every D <= 256, fp32 and fp64 (checked by test_attention_cuda_plan).
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

#include "kernels/cpu/attention.h"
#include "kernels/numeric.h"

namespace gdn::attn::cuda_plan {

inline constexpr int kThreads = 256;  // threads per block (8 warps)
// Register accumulator elements per thread per output: 8 fp32, 4 fp64 (8 fp64 spill on sm_80).
template <typename A>
inline constexpr int kMaxPerThread = sizeof(A) == 8 ? 4 : 8;
inline constexpr int64_t kMaxSmem = 48 * 1024;

// The shared memory layout for tile size bt, head dim D, accumulator bytes acc (4 or 8), in
// accumulator elements from the start: tiles a, b, c, d ([bt][D + 1] each), scores s, t
// ([bt][bt + 1] each), then the row statistics r0, r1 (bt each).
struct Layout {
  int64_t ld, lds;  // leading dims: D + 1, bt + 1
  int64_t a, b, c, d, s, t, r0, r1, elems;
};

GDN_HD Layout layout_of(int64_t bt, int64_t D) {
  Layout l{};
  l.ld = D + 1;
  l.lds = bt + 1;
  const int64_t tile = bt * l.ld, scores = bt * l.lds;
  l.a = 0;
  l.b = l.a + tile;
  l.c = l.b + tile;
  l.d = l.c + tile;
  l.s = l.d + tile;
  l.t = l.s + scores;
  l.r0 = l.t + scores;
  l.r1 = l.r0 + bt;
  l.elems = l.r1 + bt;
  return l;
}

struct Plan {
  int64_t bt = 0;          // tile rows; 0: no tile fits (D too large)
  int64_t smem_bytes = 0;  // dynamic shared memory of every kernel
};

inline Plan plan_for(int64_t D, int64_t acc_bytes) {
  for (int64_t bt : {64, 32, 16, 8, 4}) {
    const int64_t bytes = layout_of(bt, D).elems * acc_bytes;
    const int64_t per_thread = acc_bytes == 8 ? kMaxPerThread<double> : kMaxPerThread<float>;
    if (bt * D <= int64_t(kThreads) * per_thread && bytes <= kMaxSmem) return Plan{bt, bytes};
  }
  return Plan{};
}

// Quotient and remainder in 32 bits: a 64-bit division is a called subroutine on the GPU (whose
// saved registers spill). Every operand divided here (tokens, positions, tile and row indices,
// heads, D) is below 2^31: the host refuses B T H >= 2^31 (fits_int32).
GDN_HD int64_t div32(int64_t a, int64_t b) {
  return int32_t(a) / int32_t(b);
}
GDN_HD int64_t mod32(int64_t a, int64_t b) {
  return int32_t(a) % int32_t(b);
}
inline bool fits_int32(const Problem& p) {
  return p.B * p.T * p.H < (int64_t(1) << 31);
}

// A tile: rows [start, start + rows) of the sequence whose first token (over the flattened B * T
// tokens) is tok0 and whose length is len.
struct TileSpan {
  int64_t tok0, len, start;
};

// The tiles of every sequence, in order [sequence][tile]. Packed: `spans` (device memory, built by
// the host with tile_spans); unpacked (spans null): B rows of T tokens, tiles_per_row each.
struct TileTable {
  const TileSpan* spans;
  int64_t count;                 // tiles in all
  int64_t T, tiles_per_row, bt;  // unpacked only (bt always)
  GDN_HD TileSpan at(int64_t i) const {
    if (spans) return spans[i];
    const int64_t row = div32(i, tiles_per_row);
    return TileSpan{row * T, T, mod32(i, tiles_per_row) * bt};
  }
};

inline int64_t tiles_in(int64_t len, int64_t bt) {
  return (len + bt - 1) / bt;
}

// The spans of a packed Problem (empty unpacked: the kernels compute them).
inline std::vector<TileSpan> tile_spans(const Problem& p, int64_t bt) {
  std::vector<TileSpan> spans;
  if (!p.packed()) return spans;
  for (size_t n = 0; n + 1 < p.cu_seqlens.size(); ++n) {
    const int64_t tok0 = p.cu_seqlens[n], len = p.cu_seqlens[n + 1] - tok0;
    for (int64_t start = 0; start < len; start += bt) spans.push_back(TileSpan{tok0, len, start});
  }
  return spans;
}

inline int64_t tile_count(const Problem& p, int64_t bt) {
  if (!p.packed()) return p.B * tiles_in(p.T, bt);
  int64_t n = 0;
  for (size_t i = 0; i + 1 < p.cu_seqlens.size(); ++i)
    n += tiles_in(p.cu_seqlens[i + 1] - p.cu_seqlens[i], bt);
  return n;
}

// Workspace the tile table takes (at the workspace's start), in 4-byte units (enough for fp64
// workspaces too), rounded up to 16: 0 unpacked.
inline int64_t table_elems(const Problem& p, int64_t bt) {
  if (!p.packed()) return 0;
  const int64_t units = (tile_count(p, bt) * int64_t(sizeof(TileSpan)) + 3) / 4;
  return (units + 15) / 16 * 16;
}

// ---- visibility (positions within a sequence) ---------------------------------------------------

// The first key query t sees: 0 (full causal) or max(0, t - window + 1).
GDN_HD int64_t first_key(int64_t window, int64_t t) {
  return window > 0 ? (t - window + 1 > 0 ? t - window + 1 : 0) : 0;
}
// The last query that sees key s in a sequence of len tokens.
GDN_HD int64_t last_query(int64_t window, int64_t s, int64_t len) {
  return window > 0 ? (s + window - 1 < len - 1 ? s + window - 1 : len - 1) : len - 1;
}
// Whether query t sees key s.
GDN_HD bool visible(int64_t window, int64_t t, int64_t s) {
  return s <= t && s >= first_key(window, t);
}
// An inclusive range of tile indices.
struct TileRange {
  int64_t first, last;
};
// Key tiles some query of the query tile at r0 (br rows) sees.
GDN_HD TileRange key_tiles_seen(int64_t window, int64_t bt, int64_t r0, int64_t br) {
  return TileRange{div32(first_key(window, r0), bt), div32(r0 + br - 1, bt)};
}
// Query tiles with some query that sees the key tile at c0 (bc rows).
GDN_HD TileRange query_tiles_seeing(int64_t window, int64_t bt, int64_t c0, int64_t bc,
                                    int64_t len) {
  return TileRange{div32(c0, bt), div32(last_query(window, c0 + bc - 1, len), bt)};
}

// Index in the [B, H, T] layout of lse and Delta of flattened token tok, head h.
GDN_HD int64_t stat_index(int64_t T, int64_t H, int64_t tok, int64_t h) {
  return (div32(tok, T) * H + h) * T + mod32(tok, T);
}

}  // namespace gdn::attn::cuda_plan
