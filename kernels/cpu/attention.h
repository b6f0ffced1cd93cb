// Causal softmax attention on the CPU, tiled with an online softmax (FlashAttention-2): the
// T x T score matrix is never materialised, only tiles of kQueryTile x kKeyTile scores.
//
// Layout (flash-attention / fla conventions, time-major, contiguous, row-major):
//   q, o, d_o, dq [B, T, H, D]   k, v, dk, dv [B, T, HKV, D]   lse [B, H, T]
// H is a multiple of HKV (grouped-query attention): query head h reads key/value head
// h / (H / HKV); dk and dv sum over the query heads of a group.
// Per (sequence, query head), query t sees the keys s with first(t) <= s <= t, where
// first(t) = 0 (full causal, window = 0) or max(0, t - window + 1) (sliding window of `window`
// keys: itself and window - 1 before), positions counted from the sequence start:
//   S_ts = scale q_t . k_s,  P_ts = exp(S_ts - lse_t),  lse_t = log sum_s exp(S_ts),
//   o_t = sum_s P_ts v_s.
// Packed sequences (Problem::cu_seqlens, fla's convention: B = 1, sequence n is tokens
// [cu[n], cu[n + 1])): attention never crosses a sequence start; each sequence is computed as if
// it were alone.
//
// Kernels never allocate: the caller asks for the workspace sizes below (counts of acc_t<T>
// elements), allocates and passes pointers. Results do not depend on the thread count.
#pragma once
#include <cstdint>
#include <vector>

#include "kernels/numeric.h"

namespace gdn::attn {

// Rows of a query tile and of a key tile: large enough that the BLAS calls on a tile pair amortise
// their packing and call overhead (64 x 64 tiles ran at a quarter of the sgemm peak).
inline constexpr int64_t kQueryTile = 128;
inline constexpr int64_t kKeyTile = 256;
// Largest head dim.
inline constexpr int64_t kMaxHeadDim = 256;

struct Problem {
  int64_t B = 1, T = 1, H = 1, HKV = 1, D = 64;
  int64_t window = 0;  // 0: full causal; w > 0: query t sees keys max(start, t - w + 1) .. t
  double scale = 0;    // resolved by the caller (usually D^-1/2); 0 is refused
  // Packed sequences: N + 1 offsets 0 = cu[0] < ... < cu[N] = T with B = 1; empty: B sequences
  // of T tokens each.
  std::vector<int64_t> cu_seqlens;
  bool packed() const { return !cu_seqlens.empty(); }
  int64_t num_seqs() const { return packed() ? int64_t(cu_seqlens.size()) - 1 : B; }
  int64_t group() const { return H / HKV; }  // query heads per key/value head
};

// Throws std::invalid_argument naming what is wrong: sizes >= 1, H a multiple of HKV,
// window >= 0, scale finite and nonzero, D <= kMaxHeadDim, cu_seqlens well formed.
void validate(const Problem& p);

// Acc elements of scratch the forward / backward need while they run (freed after).
int64_t forward_workspace_elems(const Problem& p);
int64_t backward_workspace_elems(const Problem& p);

// Writes o and lse (saved for the backward). T is float, double or bf16 (computes in acc_t<T>).
template <typename T>
void forward_cpu(const Problem& p, const T* q, const T* k, const T* v, T* o, acc_t<T>* lse,
                 acc_t<T>* workspace);

// Given o and lse from the forward of the same Problem and d_o = dL/do, writes dq, dk, dv
// (overwritten, not accumulated).
template <typename T>
void backward_cpu(const Problem& p, const T* q, const T* k, const T* v, const T* o,
                  const acc_t<T>* lse, const T* d_o, T* dq, T* dk, T* dv, acc_t<T>* workspace);

}  // namespace gdn::attn
