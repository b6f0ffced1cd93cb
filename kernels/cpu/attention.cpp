// Causal softmax attention on the CPU (kernels/cpu/attention.h), FlashAttention-2 style.
//
// Forward, per (sequence, query head, query tile of kQueryTile rows), over the key tiles it sees:
//   S = scale Q K^T (masked),  m' = max(m, rowmax S),  P = exp(S - m'),
//   l = l e^{m - m'} + rowsum P,  O = O e^{m - m'} + P V;   at the end O /= l, lse = m + log l.
// Backward, with Delta_t = do_t . o_t (= rowsum(dP o P), the softmax Jacobian's correction):
//   P = exp(scale Q K^T - lse),  dV = P^T dO,  dP = dO V^T,  dS = P o (dP - Delta),
//   dK = scale dS^T Q,  dQ = scale dS K.
// dK, dV are summed per (sequence, kv head, key tile) over the group's query heads and the query
// tiles that see the key tile. dQ is summed per (sequence, query head, query tile) over its key
// tiles in order, in one of two ways with the same GEMMs on the same operands, so the same bits:
//   one pass:  a thread owns a whole (sequence, kv head) and adds dS K into dq as it computes
//              each dS for dK (5 tile GEMMs per tile pair); taken when those items keep every
//              thread busy and dq is in the acc type (accumulated in place);
//   two passes: the dK/dV pass, then a dQ pass per query tile recomputing P and dS (7 GEMMs).
// Each output element is summed by one thread in a fixed order (no atomics), so results do not
// depend on the thread count.
//
// The tile GEMMs are cpu::tile_gemm (an AVX-512 micro-kernel for fp32). Its B operand is
// row-major, so S = Q K^T and dP = dO V^T read K^T and V^T, transposed once per call into the
// workspace ([HKV, D, tokens]).
//
// Positions are counted from the start of each sequence, and tiles are aligned to it, so a tile
// never holds two sequences.
#include "kernels/cpu/attention.h"
#include "kernels/trace_events.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

#include "kernels/cpu/gemm.h"
#include "kernels/cpu/softmax_rows.h"
#include "kernels/cpu/tile_gemm.h"
#include "kernels/gated_delta_rule.h"  // gdr::validate_cu_seqlens

namespace gdn::attn {

namespace {

[[noreturn]] void fail(const std::string& msg) {
  throw std::invalid_argument("attn: " + msg);
}

// ---- sequences, tiles, visibility -------------------------------------------------------------

// One sequence: tokens [tok0, tok0 + len) of the B * T flattened tokens.
struct Sequence {
  int64_t tok0, len;
};

std::vector<Sequence> sequences(const Problem& p) {
  std::vector<Sequence> s(p.num_seqs());
  for (int64_t n = 0; n < p.num_seqs(); ++n)
    s[n] = p.packed() ? Sequence{p.cu_seqlens[n], p.cu_seqlens[n + 1] - p.cu_seqlens[n]}
                      : Sequence{n * p.T, p.T};
  return s;
}

int64_t tiles_in(int64_t len, int64_t tile) {
  return (len + tile - 1) / tile;
}

int64_t total_tiles(const Problem& p, int64_t tile) {
  int64_t n = 0;
  for (const Sequence& s : sequences(p)) n += tiles_in(s.len, tile);
  return n;
}

int64_t longest_sequence(const Problem& p) {
  int64_t longest = 0;
  for (const Sequence& s : sequences(p)) longest = std::max(longest, s.len);
  return longest;
}

// A work item: the tile of rows [start, start + rows) of sequence `seq` for head `head` (a query
// head, or a kv head in the dK/dV pass).
struct Tile {
  Sequence seq;
  int64_t head, start, rows;
};

// Every tile (of `tile` rows) of every head, ordered [sequence][head][tile].
std::vector<Tile> tiles_of(const std::vector<Sequence>& seqs, int64_t heads, int64_t tile) {
  std::vector<Tile> tiles;
  for (const Sequence& s : seqs)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t start = 0; start < s.len; start += tile)
        tiles.push_back(Tile{s, h, start, std::min(tile, s.len - start)});
  return tiles;
}

// The first key query t sees (both positions in its sequence).
int64_t first_key(const Problem& p, int64_t t) {
  return p.window > 0 ? std::max<int64_t>(0, t - p.window + 1) : 0;
}

// The last query that sees key s in a sequence of `len` tokens.
int64_t last_query(const Problem& p, int64_t s, int64_t len) {
  return p.window > 0 ? std::min(len - 1, s + p.window - 1) : len - 1;
}

// Columns [lo, hi) of the key tile at c0 (bc rows) that query t sees; empty when hi <= lo.
struct Span {
  int64_t lo, hi;
};
Span visible_keys(const Problem& p, int64_t t, int64_t c0, int64_t bc) {
  return Span{std::max<int64_t>(first_key(p, t) - c0, 0), std::min(t - c0 + 1, bc)};
}

// Key tiles [first, last] (tile indices) that some query of the query tile at r0 (br rows) sees.
std::pair<int64_t, int64_t> key_tiles_seen(const Problem& p, int64_t r0, int64_t br) {
  return {first_key(p, r0) / kKeyTile, (r0 + br - 1) / kKeyTile};
}

// Query tiles [first, last] with some query that sees the key tile at c0 (bc rows).
std::pair<int64_t, int64_t> query_tiles_seeing(const Problem& p, int64_t c0, int64_t bc,
                                               int64_t len) {
  return {c0 / kQueryTile, last_query(p, c0 + bc - 1, len) / kQueryTile};
}

// Index in the [B, H, T] layout of lse (and Delta) of flattened token `tok`, head h. The rows of a
// tile are consecutive there.
int64_t stat_index(const Problem& p, int64_t tok, int64_t h) {
  const int64_t row = tok / p.T;
  return (row * p.H + h) * p.T + tok % p.T;
}

// ---- scratch ------------------------------------------------------------------------------------

// Scratch sets: one per work item up to kScratchSets; beyond that items take the sets in turn
// (item i uses set i mod sets, the sets under a static schedule), so the workspace size is known
// before the thread count and the result does not depend on it (as kernels/cpu/gdr_internal.h).
// 32 sets (up to 32 threads) keep the backward's workspace near 18 MiB at D = 64: it is freshly
// allocated per call, and first-touch page faults of a larger one cost more than its GEMMs gain.
constexpr int64_t kScratchSets = 32;
int64_t scratch_sets(int64_t items) {
  return std::min(items, kScratchSets);
}

// A leading dim of at least n elements whose rows are not a multiple of 4 KiB apart: rows that
// far apart share the L1 cache's sets, and a micro-kernel walking down 64 of them would evict its
// own operands (T = 2048 fp32 rows are 8 KiB apart).
int64_t padded_ld(int64_t n) {
  return (n + 15) / 16 * 16 + 16;
}

// One scratch set of tile buffers (acc type), carved from `base` (null: only count `used`).
// Query-side tiles are [qrows, D], key-side tiles [krows, D] (leading dim D), score tiles
// [qrows, krows] (leading dim ld); each is a full tile, or the longest sequence when shorter.
template <typename A>
struct Scratch {
  int64_t qrows = 0, krows = 0, ld = 0;  // ld: the leading dim of the score tiles
  A *q = nullptr, *k = nullptr, *v = nullptr, *s = nullptr;  // s: scores, then P
  A* o = nullptr;                                            // forward: the unnormalised output
  A *d_o = nullptr, *dp = nullptr;                           // backward: dO; dP, then dS
  A *dk = nullptr, *dv = nullptr, *dq = nullptr;             // backward sums (dq reuses dk)
  int64_t used = 0;

  Scratch(const Problem& p, A* base, bool backward)
      : qrows(std::min(kQueryTile, longest_sequence(p))),
        krows(std::min(kKeyTile, longest_sequence(p))),
        ld(padded_ld(krows)) {
    const int64_t qtile = qrows * p.D, ktile = krows * p.D, scores = qrows * ld;
    q = take(base, qtile);
    v = take(base, ktile);
    s = take(base, scores);
    if (!backward) {
      o = take(base, qtile);
      return;
    }
    k = take(base, ktile);
    d_o = take(base, qtile);
    dp = take(base, scores);
    dk = take(base, ktile);
    dv = take(base, ktile);
    dq = dk;  // the dK/dV pass and the dQ pass run one after the other (qrows <= krows)
  }

 private:
  A* take(A* base, int64_t n) {
    A* at = base ? base + used : nullptr;
    used += n;
    return at;
  }
};

// Runs body(tile, scratch) for every tile in parallel, scratch set j taking tiles j, j + sets, ...
// in order (carved from ws at j * per_set).
template <typename A, class Body>
void for_each_tile(const Problem& p, const std::vector<Tile>& tiles, bool backward, A* ws,
                   const Body& body) {
  const int64_t n = int64_t(tiles.size()), sets = scratch_sets(n);
  const int64_t per_set = Scratch<A>(p, nullptr, backward).used;
  // Round-robin: a causal tile's cost grows with its index, so contiguous blocks of a head's tiles
  // would leave one thread the cheap half; the sets go to whichever thread is free, the last
  // (dearest) first (which thread runs a set does not change the result).
#pragma omp parallel
  {
    GDN_TRACE_WORKER(__func__);
#pragma omp for schedule(dynamic, 1)
    for (int64_t jj = 0; jj < sets; ++jj) {
      const int64_t j = sets - 1 - jj;
      const Scratch<A> w(p, ws + j * per_set, backward);
      for (int64_t i = j; i < n; i += sets) body(tiles[i], w);
    }
  }
}

// ---- tile loads and stores ----------------------------------------------------------------------

// dst[i, :] = src[i * stride, 0:cols] for i < rows, in the acc type (dst leading dim cols).
template <typename T, typename A>
void load_rows(const T* src, int64_t stride, int64_t rows, int64_t cols, A* dst) {
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) dst[i * cols + j] = to_acc(src[i * stride + j]);
}

// Rows of a [rows, D] tile as the GEMMs read them: first row and leading dim.
template <typename A>
struct Rows {
  const A* at;
  int64_t ld;
};

// The tile src[i * stride, 0:cols], i < rows: the tensor itself when it is contiguous and in the
// acc type, else copied (converted) into buf. Strided rows H * D apart would be 4 KiB-aliased
// operands for the tile GEMMs (padded_ld); a copy costs 1% of the products it feeds.
template <typename T, typename A>
Rows<A> view_rows(const T* src, int64_t stride, int64_t rows, int64_t cols, A* buf) {
  if constexpr (std::is_same_v<T, A>)
    if (stride == cols) return {src, stride};
  load_rows(src, stride, rows, cols, buf);
  return {buf, cols};
}

// dst[i * stride, 0:cols] = mul_i src[i, :] for i < rows (mul null: 1), converted to T.
template <typename T, typename A>
void store_rows(const A* src, int64_t rows, int64_t cols, const A* mul, T* dst, int64_t stride) {
  for (int64_t i = 0; i < rows; ++i) {
    const A m = mul ? mul[i] : A(1);
    for (int64_t j = 0; j < cols; ++j) dst[i * stride + j] = from_acc<T>(m * src[i * cols + j]);
  }
}

// The rows of tile (seq, start, rows) of head h in a [tokens, heads, D] tensor.
template <typename T>
T* rows_of(T* x, const Sequence& s, int64_t start, int64_t heads, int64_t h, int64_t D) {
  return x + ((s.tok0 + start) * heads + h) * D;
}

// ---- keys and values transposed ---------------------------------------------------------------

// The leading dim of a transposed [tokens, HKV, D] tensor, [HKV, D, ld]: the token count padded.
int64_t transposed_ld(const Problem& p) {
  return padded_ld(p.B * p.T);
}
int64_t transposed_elems(const Problem& p) {
  return p.HKV * p.D * transposed_ld(p);
}

// xt[(h * D + d) * ld + tok] = x[(tok * heads + h) * D + d], in the acc type.
template <typename T, typename A>
void transpose_heads(const T* x, int64_t tokens, int64_t heads, int64_t D, int64_t ld, A* xt) {
  constexpr int64_t kBlock = 64;  // tokens per work item: 64 x D reads stay in cache
  const int64_t blocks = (tokens + kBlock - 1) / kBlock;
#pragma omp parallel
  {
    GDN_TRACE_WORKER(__func__);
#pragma omp for collapse(2) schedule(static)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t b = 0; b < blocks; ++b) {
        const int64_t t0 = b * kBlock, t1 = std::min(tokens, t0 + kBlock);
        for (int64_t d = 0; d < D; ++d)
          for (int64_t t = t0; t < t1; ++t)
            xt[(h * D + d) * ld + t] = to_acc(x[(t * heads + h) * D + d]);
      }
  }
}

// The key tile at c0 of sequence s, kv head h, in a transposed tensor: [D, tile].
template <typename A>
Rows<A> transposed_tile(const Problem& p, const A* xt, const Sequence& s, int64_t c0, int64_t h) {
  const int64_t ld = transposed_ld(p);
  return {xt + h * p.D * ld + s.tok0 + c0, ld};
}

// ---- forward ------------------------------------------------------------------------------------

// The visible columns [lo, hi) of a score row of bc columns, clipped to it (lo <= hi <= bc).
Span clipped(const Span& keys, int64_t bc) {
  const int64_t lo = std::min(keys.lo, bc);
  return {lo, std::max(std::min(keys.hi, bc), lo)};
}

// row[j] = exp(row[j] - shift) over the visible columns of a score row, 0 elsewhere (bc
// columns); returns the row's sum.
template <typename A>
A exp_visible(const Span& keys, int64_t bc, A shift, A* row) {
  const auto [lo, hi] = clipped(keys, bc);
  std::fill(row, row + lo, A(0));
  const A sum = cpu::exp_shifted_sum(row + lo, shift, hi - lo, row + lo);
  std::fill(row + hi, row + bc, A(0));
  return sum;
}

// One step of the online softmax: on entry w.s holds S = scale Q K^T of the query tile at r0 (br
// rows) and the key tile at c0 (bc rows). Per row i, over the visible columns,
//   m' = max(m_i, max_j S_ij),  P_ij = exp(S_ij - m'),  l_i = l_i e^{m_i - m'} + sum_j P_ij,
// O_i *= e^{m_i - m'}; P (0 where masked) replaces S. A row that has seen no key yet keeps
// m = -inf, l = 0, O = 0 (its factor is 1, never exp(-inf - -inf)).
template <typename A>
void online_softmax_step(const Problem& p, const Scratch<A>& w, int64_t r0, int64_t br, int64_t c0,
                         int64_t bc, A* m, A* l) {
  for (int64_t i = 0; i < br; ++i) {
    const Span keys = visible_keys(p, r0 + i, c0, bc);
    A* row = w.s + i * w.ld;
    const A m_new = cpu::row_max(row + keys.lo, std::max<int64_t>(keys.hi - keys.lo, 0), m[i]);
    const A factor = m_new == m[i] ? A(1) : std::exp(m[i] - m_new);
    l[i] = l[i] * factor + exp_visible(keys, bc, m_new, row);
    m[i] = m_new;
    if (factor != A(1))
      for (int64_t d = 0; d < p.D; ++d) w.o[i * p.D + d] *= factor;
  }
}

// o and lse of query tile qt (head qt.head).
template <typename T, typename A>
void forward_tile(const Problem& p, const Tile& qt, const T* q, const A* kt, const T* v, T* o,
                  A* lse, const Scratch<A>& w) {
  const int64_t D = p.D, h = qt.head, kv = h / p.group(), r0 = qt.start, br = qt.rows;
  const A scale = A(p.scale);
  const Rows<A> qr = view_rows(rows_of(q, qt.seq, r0, p.H, h, D), p.H * D, br, D, w.q);
  std::fill(w.o, w.o + br * D, A(0));
  A m[kQueryTile], l[kQueryTile];  // running row max and row sum of exp(S - m)
  std::fill(m, m + br, -std::numeric_limits<A>::infinity());
  std::fill(l, l + br, A(0));
  const auto [first, last] = key_tiles_seen(p, r0, br);
  for (int64_t c = first; c <= last; ++c) {
    // Keys after the tile's last query are invisible to it: their columns are not computed.
    const int64_t c0 = c * kKeyTile, bc = std::min(kKeyTile, r0 + br - c0);
    const Rows<A> ktr = transposed_tile(p, kt, qt.seq, c0, kv);
    const Rows<A> vr = view_rows(rows_of(v, qt.seq, c0, p.HKV, kv, D), p.HKV * D, bc, D, w.v);
    const int64_t diag = r0 - c0;  // query i sees key j <= i + diag
    cpu::tile_gemm(br, bc, D, scale, qr.at, qr.ld, int64_t(1), ktr.at, ktr.ld, A(0), w.s, w.ld,
                   {cpu::Band::c_lower, diag});  // S = sc Q K^T
    online_softmax_step(p, w, r0, br, c0, bc, m, l);
    cpu::tile_gemm(br, D, bc, A(1), w.s, w.ld, int64_t(1), vr.at, vr.ld, A(1), w.o, D,
                   {cpu::Band::a_lower, diag});  // O += P V
  }
  // Each query sees at least itself, so l > 0: o = O / l, lse = m + log l.
  A inv_l[kQueryTile];
  A* lse_rows = lse + stat_index(p, qt.seq.tok0 + r0, h);
  for (int64_t i = 0; i < br; ++i) {
    inv_l[i] = A(1) / l[i];
    lse_rows[i] = m[i] + std::log(l[i]);
  }
  store_rows(w.o, br, D, inv_l, rows_of(o, qt.seq, r0, p.H, h, D), p.H * D);
}

// ---- backward -----------------------------------------------------------------------------------

// Delta_t = do_t . o_t for every token and query head, in the [B, H, T] layout of lse.
template <typename T, typename A>
void compute_delta(const Problem& p, const T* o, const T* d_o, A* delta) {
  const int64_t tokens = p.B * p.T, D = p.D;
#pragma omp parallel
  {
    GDN_TRACE_WORKER(__func__);
#pragma omp for schedule(static)
    for (int64_t tok = 0; tok < tokens; ++tok)
      for (int64_t h = 0; h < p.H; ++h) {
        const T* o_row = o + (tok * p.H + h) * D;
        const T* do_row = d_o + (tok * p.H + h) * D;
        A dot = 0;
        for (int64_t d = 0; d < D; ++d) dot += to_acc(o_row[d]) * to_acc(do_row[d]);
        delta[stat_index(p, tok, h)] = dot;
      }
  }
}

// The query-side rows of a tile (Q, dO) and the key-side rows (K, V; K^T, V^T).
template <typename A>
struct QuerySide {
  Rows<A> q, d_o;
};
template <typename A>
struct KeySide {
  Rows<A> k, v, kt, vt;
};

// Given Q of the query tile at r0 (br rows) and K of the key tile at c0 (bc rows):
// w.s = P = exp(scale Q K^T - lse), 0 where masked.
template <typename A>
void recompute_probs(const Problem& p, const Scratch<A>& w, const QuerySide<A>& qs,
                     const KeySide<A>& ks, int64_t r0, int64_t br, int64_t c0, int64_t bc,
                     const A* lse_rows) {
  cpu::tile_gemm(br, bc, p.D, A(p.scale), qs.q.at, qs.q.ld, int64_t(1), ks.kt.at, ks.kt.ld, A(0),
                 w.s, w.ld, {cpu::Band::c_lower, r0 - c0});
  for (int64_t i = 0; i < br; ++i) {
    const Span keys = visible_keys(p, r0 + i, c0, bc);
    exp_visible(keys, bc, lse_rows[i], w.s + i * w.ld);
  }
}

// With w.s = P of the query tile at r0 (br rows) and the key tile at c0 (bc keys):
// w.dp = dS = P o (dP - Delta), dP = dO V^T, over the visible entries; dS = 0 at the masked ones
// (P = 0 there; dP is not computed past the diagonal).
template <typename A>
void score_grads(const Problem& p, const Scratch<A>& w, const QuerySide<A>& qs,
                 const KeySide<A>& ks, int64_t r0, int64_t br, int64_t c0, int64_t bc,
                 const A* delta_rows) {
  cpu::tile_gemm(br, bc, p.D, A(1), qs.d_o.at, qs.d_o.ld, int64_t(1), ks.vt.at, ks.vt.ld, A(0),
                 w.dp, w.ld, {cpu::Band::c_lower, r0 - c0});
  for (int64_t i = 0; i < br; ++i) {
    const Span keys = visible_keys(p, r0 + i, c0, bc);
    const auto [lo, hi] = clipped(keys, bc);
    A* row = w.dp + i * w.ld;
    std::fill(row, row + lo, A(0));
    cpu::softmax_grad_row(w.s + i * w.ld + lo, delta_rows[i], hi - lo, row + lo);
    std::fill(row + hi, row + bc, A(0));
  }
}

// With w.dp = dS of the query tile at r0 (br rows) and the key tile at c0 (bc keys):
// dq_rows += scale dS K (dq_rows: leading dim ld).
template <typename A>
void add_query_grads(const Problem& p, const Scratch<A>& w, const KeySide<A>& ks, int64_t r0,
                     int64_t br, int64_t c0, int64_t bc, A* dq_rows, int64_t ld) {
  cpu::tile_gemm(br, p.D, bc, A(p.scale), w.dp, w.ld, int64_t(1), ks.k.at, ks.k.ld, A(1), dq_rows,
                 ld, {cpu::Band::a_lower, r0 - c0});
}

// Loads the query-side rows of tile (seq, r0, br) of query head h: Q and dO.
template <typename T, typename A>
QuerySide<A> load_query_side(const Problem& p, const Sequence& s, int64_t r0, int64_t br, int64_t h,
                             const T* q, const T* d_o, const Scratch<A>& w) {
  const int64_t ld = p.H * p.D;
  return {view_rows(rows_of(q, s, r0, p.H, h, p.D), ld, br, p.D, w.q),
          view_rows(rows_of(d_o, s, r0, p.H, h, p.D), ld, br, p.D, w.d_o)};
}

// The inputs of the backward: the tensors, and K, V transposed.
template <typename T, typename A>
struct BackwardInputs {
  const T *q, *k, *v, *d_o;
  const A *kt, *vt, *lse, *delta;
};

// Loads the key-side rows of tile (seq, c0, bc) of kv head kv: K and V, K^T and V^T.
template <typename T, typename A>
KeySide<A> load_key_side(const Problem& p, const Sequence& s, int64_t c0, int64_t bc, int64_t kv,
                         const BackwardInputs<T, A>& in, const Scratch<A>& w) {
  const int64_t ld = p.HKV * p.D;
  return {view_rows(rows_of(in.k, s, c0, p.HKV, kv, p.D), ld, bc, p.D, w.k),
          view_rows(rows_of(in.v, s, c0, p.HKV, kv, p.D), ld, bc, p.D, w.v),
          transposed_tile(p, in.kt, s, c0, kv), transposed_tile(p, in.vt, s, c0, kv)};
}

// dk and dv of key tile kt (kv head kt.head): sums over the group's query heads, and over the
// query tiles that see the key tile, in that order. With dq (in the acc type) it also adds each
// tile pair's scale dS K into dq's rows (the one-pass backward).
template <typename T, typename A>
void key_tile_grads(const Problem& p, const Tile& kt, const BackwardInputs<T, A>& in, T* dk, T* dv,
                    A* dq, const Scratch<A>& w) {
  const int64_t D = p.D, kv = kt.head, c0 = kt.start, bc = kt.rows;
  const KeySide<A> ks = load_key_side(p, kt.seq, c0, bc, kv, in, w);
  std::fill(w.dk, w.dk + bc * D, A(0));
  std::fill(w.dv, w.dv + bc * D, A(0));
  const auto [first, last] = query_tiles_seeing(p, c0, bc, kt.seq.len);
  for (int64_t h = kv * p.group(); h < (kv + 1) * p.group(); ++h)
    for (int64_t r = first; r <= last; ++r) {
      const int64_t r0 = r * kQueryTile, br = std::min(kQueryTile, kt.seq.len - r0);
      const int64_t stats = stat_index(p, kt.seq.tok0 + r0, h);
      const QuerySide<A> qs = load_query_side(p, kt.seq, r0, br, h, in.q, in.d_o, w);
      const int64_t bv = std::min(bc, r0 + br - c0);  // keys after the last query: no gradient
      recompute_probs(p, w, qs, ks, r0, br, c0, bv, in.lse + stats);
      // Key i is seen by the queries k >= i - (r0 - c0): P^T and dS^T are 0 before.
      const cpu::Band seen{cpu::Band::a_upper, r0 - c0};
      cpu::tile_gemm(bv, D, br, A(1), w.s, int64_t(1), w.ld, qs.d_o.at, qs.d_o.ld, A(1), w.dv, D,
                     seen);  // dV += P^T dO
      score_grads(p, w, qs, ks, r0, br, c0, bv, in.delta + stats);
      cpu::tile_gemm(bv, D, br, A(p.scale), w.dp, int64_t(1), w.ld, qs.q.at, qs.q.ld, A(1), w.dk, D,
                     seen);  // dK += sc dS^T Q
      if (dq)
        add_query_grads(p, w, ks, r0, br, c0, bv, rows_of(dq, kt.seq, r0, p.H, h, D), p.H * D);
    }
  store_rows(w.dk, bc, D, static_cast<const A*>(nullptr), rows_of(dk, kt.seq, c0, p.HKV, kv, D),
             p.HKV * D);
  store_rows(w.dv, bc, D, static_cast<const A*>(nullptr), rows_of(dv, kt.seq, c0, p.HKV, kv, D),
             p.HKV * D);
}

// dk, dv and dq of one (sequence, kv head) (kv.head), whole: dq's rows of the group's query heads
// are zeroed, then every key tile in order adds its dS K.
template <typename T, typename A>
void sequence_grads(const Problem& p, const Tile& item, const BackwardInputs<T, A>& in, T* dk,
                    T* dv, A* dq, const Scratch<A>& w) {
  const int64_t D = p.D;
  for (int64_t h = item.head * p.group(); h < (item.head + 1) * p.group(); ++h)
    for (int64_t t = 0; t < item.seq.len; ++t)
      std::fill_n(rows_of(dq, item.seq, t, p.H, h, D), D, A(0));
  for (int64_t c0 = 0; c0 < item.seq.len; c0 += kKeyTile)
    key_tile_grads(p, Tile{item.seq, item.head, c0, std::min(kKeyTile, item.seq.len - c0)}, in, dk,
                   dv, dq, w);
}

// dq of query tile qt (query head qt.head): dQ = scale sum over its key tiles of dS K.
template <typename T, typename A>
void query_tile_grads(const Problem& p, const Tile& qt, const BackwardInputs<T, A>& in, T* dq,
                      const Scratch<A>& w) {
  const int64_t D = p.D, h = qt.head, kv = h / p.group(), r0 = qt.start, br = qt.rows;
  const int64_t stats = stat_index(p, qt.seq.tok0 + r0, h);
  const QuerySide<A> qs = load_query_side(p, qt.seq, r0, br, h, in.q, in.d_o, w);
  std::fill(w.dq, w.dq + br * D, A(0));
  const auto [first, last] = key_tiles_seen(p, r0, br);
  for (int64_t c = first; c <= last; ++c) {
    // Keys after the tile's last query are invisible to it: their columns are not computed.
    const int64_t c0 = c * kKeyTile, bc = std::min(kKeyTile, r0 + br - c0);
    const KeySide<A> ks = load_key_side(p, qt.seq, c0, bc, kv, in, w);
    recompute_probs(p, w, qs, ks, r0, br, c0, bc, in.lse + stats);
    score_grads(p, w, qs, ks, r0, br, c0, bc, in.delta + stats);
    add_query_grads(p, w, ks, r0, br, c0, bc, w.dq, D);
  }
  store_rows(w.dq, br, D, static_cast<const A*>(nullptr), rows_of(dq, qt.seq, r0, p.H, h, D),
             p.H * D);
}

// The one-pass backward pays when its (sequence, kv head) items can keep every thread busy: at
// least one item per thread, and no item more than a thread's share of the work (visible
// query-key pairs).
bool one_pass_pays(const Problem& p, int threads) {
  const std::vector<Sequence> seqs = sequences(p);
  if (int64_t(seqs.size()) * p.HKV < threads || threads > kScratchSets) return false;
  double total = 0, largest = 0;
  for (const Sequence& s : seqs) {
    const double w = p.window > 0 ? double(std::min(p.window, s.len)) : double(s.len);
    const double pairs = double(s.len) * w - w * (w - 1) / 2;  // each query sees min(t+1, w) keys
    total += pairs * p.HKV;
    largest = std::max(largest, pairs);
  }
  return largest * threads <= total;
}

// Elements of Delta at the front of the backward workspace.
int64_t delta_elems(const Problem& p) {
  return p.B * p.H * p.T;
}

}  // namespace

void validate(const Problem& p) {
  const std::pair<const char*, int64_t> sizes[] = {
      {"B", p.B}, {"T", p.T}, {"H", p.H}, {"HKV", p.HKV}, {"D", p.D}};
  for (const auto& [name, value] : sizes)
    if (value < 1) fail(std::string(name) + " must be >= 1, got " + std::to_string(value));
  if (p.H % p.HKV != 0)
    fail("H (" + std::to_string(p.H) + ") must be a multiple of HKV (" + std::to_string(p.HKV) +
         ")");
  if (p.D > kMaxHeadDim)
    fail("D = " + std::to_string(p.D) + " exceeds the maximum head dim " +
         std::to_string(kMaxHeadDim));
  if (p.window < 0) fail("window must be >= 0 (0: full causal), got " + std::to_string(p.window));
  if (!std::isfinite(p.scale) || p.scale == 0)
    fail("scale must be finite and nonzero, got " + std::to_string(p.scale));
  if (p.packed()) {
    try {
      gdr::validate_cu_seqlens(p.cu_seqlens, p.B, p.T);
    } catch (const std::invalid_argument& e) {
      const std::string what = e.what(), prefix = "gdr: ";  // re-labelled as ours
      fail(what.rfind(prefix, 0) == 0 ? what.substr(prefix.size()) : what);
    }
  }
}

int64_t forward_workspace_elems(const Problem& p) {
  validate(p);
  return transposed_elems(p) +
         scratch_sets(p.H * total_tiles(p, kQueryTile)) * Scratch<float>(p, nullptr, false).used;
}

int64_t backward_workspace_elems(const Problem& p) {
  validate(p);
  // The dQ pass has the most items (H per tile; the dK/dV pass HKV per tile, the one pass HKV per
  // sequence).
  return delta_elems(p) + 2 * transposed_elems(p) +
         scratch_sets(p.H * total_tiles(p, kQueryTile)) * Scratch<float>(p, nullptr, true).used;
}

template <typename T>
void forward_cpu(const Problem& p, const T* q, const T* k, const T* v, T* o, acc_t<T>* lse,
                 acc_t<T>* workspace) {
  using A = acc_t<T>;
  validate(p);
  A* kt = workspace;
  transpose_heads(k, p.B * p.T, p.HKV, p.D, transposed_ld(p), kt);
  for_each_tile(
      p, tiles_of(sequences(p), p.H, kQueryTile), false, workspace + transposed_elems(p),
      [&](const Tile& qt, const Scratch<A>& w) { forward_tile(p, qt, q, kt, v, o, lse, w); });
}

template <typename T>
void backward_cpu(const Problem& p, const T* q, const T* k, const T* v, const T* o,
                  const acc_t<T>* lse, const T* d_o, T* dq, T* dk, T* dv, acc_t<T>* workspace) {
  using A = acc_t<T>;
  validate(p);
  A* delta = workspace;
  A* kt = delta + delta_elems(p);
  A* vt = kt + transposed_elems(p);
  A* scratch = vt + transposed_elems(p);
  compute_delta(p, o, d_o, delta);
  transpose_heads(k, p.B * p.T, p.HKV, p.D, transposed_ld(p), kt);
  transpose_heads(v, p.B * p.T, p.HKV, p.D, transposed_ld(p), vt);
  const BackwardInputs<T, A> in{q, k, v, d_o, kt, vt, lse, delta};
  const std::vector<Sequence> seqs = sequences(p);
  if constexpr (std::is_same_v<T, A>) {
    if (one_pass_pays(p, cpu::num_threads())) {
      for_each_tile(p, tiles_of(seqs, p.HKV, longest_sequence(p)), true, scratch,
                    [&](const Tile& item, const Scratch<A>& w) {
                      sequence_grads(p, item, in, dk, dv, dq, w);
                    });
      return;
    }
  }
  for_each_tile(p, tiles_of(seqs, p.HKV, kKeyTile), true, scratch,
                [&](const Tile& kt, const Scratch<A>& w) {
                  key_tile_grads(p, kt, in, dk, dv, static_cast<A*>(nullptr), w);
                });
  for_each_tile(p, tiles_of(seqs, p.H, kQueryTile), true, scratch,
                [&](const Tile& qt, const Scratch<A>& w) { query_tile_grads(p, qt, in, dq, w); });
}

#define GDN_ATTN_INSTANTIATE(T)                                                             \
  template void forward_cpu<T>(const Problem&, const T*, const T*, const T*, T*, acc_t<T>*, \
                               acc_t<T>*);                                                  \
  template void backward_cpu<T>(const Problem&, const T*, const T*, const T*, const T*,     \
                                const acc_t<T>*, const T*, T*, T*, T*, acc_t<T>*);
GDN_ATTN_INSTANTIATE(float)
GDN_ATTN_INSTANTIATE(double)
GDN_ATTN_INSTANTIATE(bf16)
#undef GDN_ATTN_INSTANTIATE

}  // namespace gdn::attn
