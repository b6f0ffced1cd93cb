// Internal helpers of the CPU gated-delta-rule kernels (gdr_*.cpp): the parallel loop over
// slices with their scratch, loading one chunk of a (batch, head) slice into the accumulator type
// with zero padding, the in-chunk gate cumsum and decay factors, the unit lower triangular
// inverse, and the entry points that the registry (kernels/gdr_registry.cpp) holds. The workspace
// layouts shared with the CUDA kernels are in kernels/gdr_workspace_layout.h.
//
// Padding: a last partial chunk is padded to C rows with q = k = v = 0, g = 0, beta = 0. With
// those values the padded chunk computes exactly the unpadded result (M, W, U, Vn rows vanish,
// G stays at its last real value), and its gradients are those of the real inputs.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/cpu/delta_rule_entries.h"
#include "kernels/cpu/fast_exp.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/lane_sum.h"
#include "kernels/gated_delta_rule.h"
#include "kernels/gdr_workspace_layout.h"  // Carver, the residual's pieces, shared layouts
#include "kernels/trace_events.h"

namespace gdn::gdr::detail {

// One (sequence, head) slice of a Problem, packed or not: sequence n (a batch row, or a packed
// sequence) with a value head (forward) or a key head (backward). Token and chunk offsets are over
// all sequences (Sequences): without packing tok0 = n T and chunk0 = n * num_chunks().
struct Slice {
  int64_t index;           // n * heads + head: the row of h0/ht/dht/dh0 (value slices)
  int64_t n, head;         // sequence; value head (forward) or key head (backward)
  int64_t tok0, len;       // tokens [tok0, tok0 + len) of the B * T (flattened) tokens
  int64_t chunk0, chunks;  // the sequence's chunks, chunked from its own first token
  // First token and real rows of chunk c (the last one may be partial).
  int64_t chunk_token(int64_t C, int64_t c) const { return tok0 + c * C; }
  int64_t chunk_rows(int64_t C, int64_t c) const { return std::min(C, len - c * C); }
  // The tile of chunk c of head h in a [sequence][head][chunk] buffer of `heads` heads.
  int64_t tile(int64_t heads, int64_t h, int64_t c) const {
    return chunk_tile(chunk0, chunks, heads, h, c);
  }
};

inline Slice slice_of(const Sequences& s, int64_t heads, int64_t index) {
  const int64_t n = index / heads;
  return Slice{index, n, index % heads, s.token[n], s.len(n), s.chunk[n], s.chunks(n)};
}

// Packed sequences that neither start from given states nor return their final states (training)
// share chunks: the row is chunked as one sequence from token 0, and a sequence that starts
// inside a chunk is a gate of -inf before its first token, masked in the chunk's matrices
// (ChunkSegments). With h0 or ht each sequence is chunked from its own first token (Sequences).
// `recurrent` always runs sequence by sequence.
inline bool shares_chunks(const Problem& p) {
  return p.packed() && !p.has_h0 && !p.want_ht;
}

// p as the chunk-based CPU kernels chunk it and size their buffers: the unpacked row when p shares
// chunks. (residual_elems keeps the per-sequence size, which is never smaller.)
inline Problem chunk_problem(const Problem& p) {
  if (!shares_chunks(p)) return p;
  Problem row = p;
  row.cu_seqlens.clear();
  return row;
}

// The sequences a chunk-based CPU kernel walks: the whole row when p shares chunks.
inline Sequences chunk_sequences(const Problem& p) {
  return sequences(chunk_problem(p));
}

// The sequences in the chunk of C rows at token t0 under shared chunks. A boundary before row b
// is a gate of -inf: the in-chunk cumsum G restarts at b, and every decay across it is 0:
//   Gam_ij = 0 for j < first[i];  gamma_i = 0 for i >= carried (the incoming state belongs to
//   the sequence before);  e_i = 0 unless row i is in the chunk's last sequence;
//   gamma_C = gamma_{C-1} = 0 when a sequence starts in the chunk.
// Masked entries are constants: their gradients vanish, and dg_t (the sum of dG over rows i >= t)
// sums only rows of t's own sequence, as the restarted cumsum needs. `split` is false for a chunk
// inside one sequence (then nothing changes, bit for bit).
struct ChunkSegments {
  bool split = false;
  int64_t carried = 0;  // rows [0, carried) continue the chunk's incoming state
  int64_t first[64];    // first[i]: the first row of row i's sequence in the chunk (C <= 64)
};

inline ChunkSegments chunk_segments(const Problem& p, int64_t t0) {
  const int64_t C = p.chunk;
  ChunkSegments s;
  s.carried = C;
  std::fill(s.first, s.first + C, int64_t(0));
  if (!shares_chunks(p)) return s;
  const std::vector<int64_t>& cu = p.cu_seqlens;
  // sequence starts t0 <= b < min(t0 + C, T); cu's last entry is T, not a start
  for (auto it = std::lower_bound(cu.begin(), cu.end() - 1, t0); it != cu.end() - 1; ++it) {
    const int64_t r = *it - t0;
    if (r >= C) break;
    if (!s.split) s.carried = r;
    s.split = true;
    std::fill(s.first + r, s.first + C, r);
  }
  return s;
}

// The sizes a slice's scratch depends on: one sequence as long as the longest (B = 1, unpacked).
inline Problem slice_problem(const Problem& p, const Sequences& s) {
  Problem one = p;
  one.cu_seqlens.clear();
  one.B = 1;
  one.T = 0;
  for (int64_t n = 0; n < s.count(); ++n) one.T = std::max(one.T, s.len(n));
  return one;
}

// Chunk c of head `head` of sequence n: tile i of a [sequence][head][chunk] buffer.
struct ChunkAt {
  int64_t n, head, c;
};
inline ChunkAt chunk_at(const Sequences& s, int64_t heads, int64_t i) {
  // The sequence whose tiles [chunk[n] heads, chunk[n + 1] heads) hold i.
  const auto after = std::upper_bound(s.chunk.begin(), s.chunk.end(), i,
                                      [heads](int64_t x, int64_t c) { return x < c * heads; });
  const int64_t n = int64_t(after - s.chunk.begin()) - 1;
  const int64_t r = i - s.chunk[n] * heads, chunks = s.chunks(n);
  return ChunkAt{n, r / chunks, r % chunks};
}

// Scratch sets of a loop over `slices` slices: one per slice up to kScratchSets; beyond that
// (many packed sequences) the slices take the sets in turn, so scratch stays bounded and warm in
// cache however many sequences there are.
inline constexpr int64_t kScratchSets = 128;
inline int64_t scratch_sets(int64_t slices) {
  return std::min(slices, kScratchSets);
}

// Workspace of an implementation whose slices over `seqs` carve Scratch: one set per slice, up to
// kScratchSets.
template <class Scratch>
int64_t slices_workspace(const Problem& p, const Sequences& seqs, bool backward) {
  return scratch_sets(seqs.count() * (backward ? p.H : p.HV)) *
         Scratch(slice_problem(p, seqs), nullptr, backward).used;
}

// Runs body(slice, w) for the value slices (n, value head) (forward) or the key slices
// (n, key head) (backward) of every sequence in parallel. Scratch set j (carved from ws at
// j * Scratch(slice_problem, nullptr, backward).used) runs slices j, j + sets, ... in order, the
// sets under a static schedule; a slice's sums never cross threads, so results do not depend on
// the thread count.
template <class Scratch, typename A, class Body>
void for_each_slice(const Problem& p, const Sequences& seqs, bool backward, A* ws,
                    const Body& body) {
  const Problem one = slice_problem(p, seqs);
  const int64_t heads = backward ? p.H : p.HV, n = seqs.count() * heads;
  const int64_t sets = scratch_sets(n), per_set = Scratch(one, nullptr, backward).used;
#pragma omp parallel
  {
    GDN_TRACE_WORKER(__func__);
#pragma omp for schedule(static)
    for (int64_t j = 0; j < sets; ++j) {
      const Scratch w(one, ws + j * per_set, backward);
      for (int64_t i = j; i < n; i += sets) body(slice_of(seqs, heads, i), w);
    }
  }
}

// dst = src[0, n), or zeros where src is null (no initial state, no incoming state gradient).
template <typename A>
void copy_or_zero(A* dst, const A* src, int64_t n) {
  if (src) {
    std::memcpy(dst, src, n * sizeof(A));
  } else {
    std::memset(dst, 0, n * sizeof(A));
  }
}

// Offsets into the time-major layouts of gated_delta_rule.h at token `tok` of the B * T
// (flattened) tokens (kernels/delta_rule_problem.h).
using delta_rule::gate_offset;
using delta_rule::qk_offset;
using delta_rule::vo_offset;

// dst[i, :] = mul * src[i * stride, :] for i < rows, zero for rows <= i < pad_rows.
template <typename T, typename A>
void load_rows(const T* src, int64_t stride, int64_t rows, int64_t cols, int64_t pad_rows, A mul,
               A* dst, int64_t ld_dst) {
  for (int64_t i = 0; i < rows; ++i) {
    const T* s = src + i * stride;
    A* d = dst + i * ld_dst;
    for (int64_t j = 0; j < cols; ++j) d[j] = mul * to_acc(s[j]);
  }
  for (int64_t i = rows; i < pad_rows; ++i) std::memset(dst + i * ld_dst, 0, cols * sizeof(A));
}

// dst[i * stride, :] = mul * src[i, :] for i < rows, converted to T.
template <typename T, typename A>
void store_rows(const A* src, int64_t ld_src, int64_t rows, int64_t cols, A mul, T* dst,
                int64_t stride) {
  for (int64_t i = 0; i < rows; ++i) {
    const A* s = src + i * ld_src;
    T* d = dst + i * stride;
    for (int64_t j = 0; j < cols; ++j) d[j] = from_acc<T>(mul * s[j]);
  }
}

// Gates of one chunk (g and beta strided by `stride`, rows real steps, C padded):
//   G_i = sum_{j <= i} g_j,  gamma_i = exp(G_i),  e_i = exp(G_{C-1} - G_i)  (both exponents <= 0)
// beta_out may be null (ssd).
// With shared chunks (seg split) G restarts at each sequence start and gamma, e are masked
// (ChunkSegments).
template <typename T, typename A>
void load_gates(const T* g, const T* beta, int64_t stride, int64_t rows, int64_t C, A* G, A* gamma,
                A* e, A* beta_out, const ChunkSegments* seg = nullptr) {
  const bool split = seg && seg->split;
  A acc = 0;
  for (int64_t i = 0; i < C; ++i) {
    if (split && seg->first[i] == i) acc = 0;  // a sequence starts at row i
    if (i < rows) acc += to_acc(g[i * stride]);
    G[i] = acc;
    gamma[i] = split && i >= seg->carried ? A(0) : std::exp(acc);
    if (beta_out) beta_out[i] = i < rows ? to_acc(beta[i * stride]) : A(0);
  }
  for (int64_t i = 0; i < C; ++i)
    e[i] = split && seg->first[i] != seg->first[C - 1] ? A(0) : std::exp(G[C - 1] - G[i]);
}

// out[j] = exp(gi - G[j]) for j < n, the decay factors of one row (gi - G[j] <= 0 in use);
// fp32 through exp_clamped (kernels/cpu/fast_exp.h), which vectorises; fp64: std::exp.
inline void decay_row(const double* G, double gi, int64_t n, double* out) {
  for (int64_t j = 0; j < n; ++j) out[j] = std::exp(gi - G[j]);
}
inline void decay_row(const float* G, float gi, int64_t n, float* out) {
  for (int64_t j = 0; j < n; ++j) out[j] = cpu::exp_clamped(gi - G[j]);
}

// row[j] = Gam_ij = exp(G_i - G_j) for j < n (n <= i + 1), 0 across a sequence start (seg).
template <typename A>
void decay_row_of(const A* G, int64_t i, int64_t n, const ChunkSegments* seg, A* row) {
  const int64_t f = seg && seg->split ? std::min(seg->first[i], n) : 0;
  for (int64_t j = 0; j < f; ++j) row[j] = 0;
  decay_row(G + f, G[i], n - f, row + f);
}

// Gam_ij = exp(G_i - G_j) for i >= j (exponent <= 0), 0 above the diagonal and across a
// sequence start (seg).
template <typename A>
void decay_matrix(const A* G, int64_t C, A* gam, const ChunkSegments* seg = nullptr) {
  for (int64_t i = 0; i < C; ++i) {
    A* row = gam + i * C;
    decay_row_of(G, i, i + 1, seg, row);
    for (int64_t j = i + 1; j < C; ++j) row[j] = 0;
  }
}

// Scratch elements invert_unit_lower needs.
inline int64_t invert_tmp_elems(int64_t C) {
  return 16 * C;
}

// In place: the strictly lower part of `a` holds M; on return a = (I + M)^-1 (unit lower).
// Blocked by 16 (C is 16, 32 or 64): each diagonal block by forward substitution
// (A_i = e_i - sum_{j<i} M_ij A_j), then block row I from (I + M) A = I:
//   A_IJ = -A_II sum_{J <= L < I} M_IL A_LJ   (two small GEMMs per block row)
template <typename A>
void invert_unit_lower(A* a, int64_t C, A* tmp) {
  const int64_t nb = 16;
  for (int64_t o = 0; o < C; o += nb)
    for (int64_t i = o; i < o + nb; ++i) {
      A* ai = a + i * C;
      for (int64_t j = o; j < i; ++j) tmp[j - o] = ai[j];
      for (int64_t j = o; j < C; ++j) ai[j] = 0;
      for (int64_t j = o; j < i; ++j) {
        const A m = tmp[j - o];
        const A* aj = a + j * C;
        for (int64_t l = o; l <= j; ++l) ai[l] -= m * aj[l];
      }
      ai[i] = 1;
    }
  for (int64_t o = nb; o < C; o += nb) {
    // tmp = M[I, :I] A[:I, :I], then A[I, :I] = -A_II tmp (disjoint columns of the same rows)
    cpu::gemm(false, false, nb, o, o, A(1), a + o * C, C, a, C, A(0), tmp, o);
    cpu::gemm(false, false, nb, o, nb, A(-1), a + o * C + o, C, tmp, o, A(0), a + o * C, C);
  }
}

using cpu::dot;
using cpu::kLanes;
using cpu::lane_sum;

// dg of one (padded) chunk. The dG of docs/design.md has the form
//   dG_i = a_i + rowsum(X)_i - colsum(X)_i  (+ c at i = C-1),  X strictly lower,
// with X = dP o P + dM o M and, in its last row, s (the e_i = Gam_{C-1,i} terms). Since G is the
// in-chunk cumsum of g, dg_t = sum_{i >= t} dG_i = sum_{i >= t} a_i + sum_{i >= t > j} X_ij + c.
// The right side is summed directly: the row and column sums cancel almost entirely under strong
// decay, and summing them first would leave fp32 rounding error larger than the result.
// col is scratch of C elements; the first `rows` values of dg are written, strided.
template <typename T, typename A>
void store_gate_grad(const A* a, const A* X, A c, int64_t rows, int64_t C, A* col, T* dg,
                     int64_t stride) {
  for (int64_t j = 0; j < C; ++j) col[j] = 0;  // col[j] = sum_{i >= t} X_ij
  A suffix = c;
  for (int64_t t = C - 1; t >= 0; --t) {
    suffix += a[t];
    for (int64_t j = 0; j < t; ++j) col[j] += X[t * C + j];
    const A cross = lane_sum<A>(t, [&](int64_t j) { return col[j]; });
    if (t < rows) dg[t * stride] = from_acc<T>(suffix + cross);
  }
}

// store_gate_grad with s (the e_i terms, docs/design.md) joining X's last row: dG -= s, and at
// the chunk end + sum(s) + c.
template <typename T, typename A>
void store_chunk_gate_grad(const A* a, A* X, const A* s, A c, int64_t rows, int64_t C, A* col,
                           T* dg, int64_t stride) {
  for (int64_t l = 0; l + 1 < C; ++l) X[(C - 1) * C + l] += s[l];
  store_gate_grad(a, X, c, rows, C, col, dg, stride);
}

// Entry points (one file each, kernels/cpu/delta_rule_entries.h), held by the registry.
GDN_DELTA_RULE_DECLARE(recurrent)
GDN_DELTA_RULE_DECLARE(chunked)
GDN_DELTA_RULE_DECLARE(fused)
GDN_DELTA_RULE_DECLARE(ssd)
#define GDN_GDR_INSTANTIATE GDN_DELTA_RULE_INSTANTIATE
// The implementations that run every slice with scratch of their own (recurrent, fused, ssd):
// Scratch<A>(slice_problem(p, s), base, backward) carves one scratch set (sized by the longest
// sequence where it depends on T), over the sequences slices_of(p) (sequences or
// chunk_sequences).
#define GDN_GDR_DEFINE_BY_SLICES GDN_DELTA_RULE_DEFINE_BY_SLICES

}  // namespace gdn::gdr::detail
