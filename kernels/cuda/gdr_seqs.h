// The sequences of a Problem as the CUDA gated-delta-rule kernels read them (recurrent, ssd,
// fused): one launch covers every sequence, its grid over (sequence, head[, V tile]), and each
// block looks its sequence up in a small table of spans (token start, length, first chunk).
//
// Packed (Problem::cu_seqlens): the host builds the table from sequences(p) and copies it into
// the kernel's workspace (upload_seq_table, gdr_seq_table.cu; kernels never allocate), behind
// the implementation's own scratch. Unpacked: no table and no copy; a span is computed from its
// index (B rows of T tokens), so the unpacked kernels do exactly what they did before.
// Tokens are counted over the whole [B, T] (row b's first token is b T), so a packed Problem
// (B = 1) and an unpacked one index q, k, v, g, beta, o the same way. Plain C++ (host and device),
// so the CPU tests and the fused kernels' emulator use it.
#pragma once
#include <algorithm>
#include <array>
#include <cstdint>
#include <vector>

#include "kernels/gated_delta_rule.h"
#include "kernels/gdr_workspace_layout.h"
#include "kernels/numeric.h"

namespace gdn::gdr::cuda_seqs {

// Sequence n: tokens [t0, t0 + len) of the packed row; its chunks (of the Problem's chunk size)
// start at c0 in the residual's [sequence][head][chunk] tiles (detail::chunk_tile).
struct SeqSpan {
  int64_t t0, len, c0;
};

// The table a kernel reads: `spans` in device (or, for the emulator, host) memory, or null for B
// unpacked rows of T tokens and NT chunks each.
struct SeqTable {
  const SeqSpan* spans;
  int64_t n;      // sequences (the rows of h0, ht, dht, dh0)
  int64_t T, NT;  // unpacked only: tokens and chunks of a row
  GDN_HD SeqSpan at(int64_t i) const { return spans ? spans[i] : SeqSpan{i * T, T, i * NT}; }
};

// The spans of a packed Problem (empty without packing: the kernels compute them).
inline std::vector<SeqSpan> seq_spans(const Problem& p) {
  std::vector<SeqSpan> spans;
  if (!p.packed()) return spans;
  const Sequences s = sequences(p);
  for (int64_t n = 0; n < s.count(); ++n) spans.push_back({s.token[n], s.len(n), s.chunk[n]});
  return spans;
}

// The table of `spans` (null when there are none: unpacked).
inline SeqTable seq_table(const Problem& p, const SeqSpan* spans) {
  return SeqTable{spans, p.num_seqs(), p.T, p.num_chunks()};
}

// Workspace the table takes, in accumulator elements counted as 4 bytes (enough for fp64
// accumulators too), 16-element aligned: 0 without packing.
inline int64_t seq_table_elems(const Problem& p) {
  if (!p.packed()) return 0;
  return detail::round_up16((p.num_seqs() * int64_t(sizeof(SeqSpan)) + 3) / 4);
}

// Where the table sits in a workspace whose own scratch takes `scratch_elems`, and the workspace
// size with it.
inline int64_t seq_table_offset(int64_t scratch_elems) {
  return detail::round_up16(scratch_elems);
}
inline int64_t with_seq_table(const Problem& p, int64_t scratch_elems) {
  return p.packed() ? seq_table_offset(scratch_elems) + seq_table_elems(p) : scratch_elems;
}

// The longest sequence (T without packing): per-sequence scratch is sized for it.
inline int64_t longest_seq(const Problem& p) {
  if (!p.packed()) return p.T;
  int64_t m = 0;
  for (size_t i = 0; i + 1 < p.cu_seqlens.size(); ++i)
    m = std::max<int64_t>(m, p.cu_seqlens[i + 1] - p.cu_seqlens[i]);
  return m;
}

// The `full` residual of chunked (states, then A, then [W | U], each [sequence][head][chunk] over
// all sequences: the CPU's packed layout, kernels/gdr_workspace_layout.h) for a packed Problem that
// the CUDA chunked kernels run one sequence at a time: sequence n's three parts, where each sits
// in the packed residual and in the residual of the sequence alone, and its elements.
struct ResidualPart {
  int64_t packed_at, alone_at, elems;
};
inline std::array<ResidualPart, 3> full_residual_parts(const Problem& p, const Sequences& s,
                                                       int64_t n) {
  const int64_t per_tile[3] = {p.K * p.V, int64_t(p.chunk) * p.chunk, p.chunk * (p.K + p.V)};
  std::array<ResidualPart, 3> parts{};
  int64_t packed_base = 0, alone_base = 0;
  for (int i = 0; i < 3; ++i) {
    const int64_t elems = p.HV * s.chunks(n) * per_tile[i];
    parts[i] = ResidualPart{packed_base + p.HV * s.chunk[n] * per_tile[i], alone_base, elems};
    packed_base += p.HV * s.total_chunks() * per_tile[i];
    alone_base += elems;
  }
  return parts;
}

// Chunks of `rows` tokens in a sequence of len tokens (a last partial one included).
GDN_HD int64_t chunks_of(int64_t len, int64_t rows) {
  return (len + rows - 1) / rows;
}

}  // namespace gdn::gdr::cuda_seqs
