// What a delta-rule Problem holds whatever its family, the gated delta rule
// (kernels/gated_delta_rule.h: gdr::Problem) or Kimi Delta Attention (kernels/kda.h: kda::Problem):
// the sizes, the states, the packing, their checks and the time-major offsets; each family adds
// its implementation (and gdr its residual policy and fused-kernel overrides). Also the API every
// family declares over its Problem (GDN_DELTA_RULE_DECLARE_API).
#pragma once
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "kernels/delta_rule_args.h"

namespace gdn::delta_rule {

// The sizes and states of a Problem: q, k [B, T, H, K], v, o [B, T, HV, V], h0, ht [N, HV, K, V].
struct Sizes {
  int64_t B = 1, T = 1, H = 1, HV = 1, K = 64, V = 64;
  int chunk = 64;        // chunk size C: 16, 32 or 64 (also the recurrent kernels' residual step)
  double scale = 0;      // resolved by the caller; 0 is not allowed
  bool has_h0 = false;   // an initial state is given
  bool want_ht = false;  // the final state is written

  int64_t group() const { return HV / H; }  // value heads per key head
  // Chunks of one unpacked row (T / C rounded up); with packing see Packed::total_chunks.
  int64_t num_chunks() const { return (T + chunk - 1) / chunk; }
};

// A family's Shape (Sizes and its own fields) with packed sequences: fla's cu_seqlens, N + 1 host
// offsets 0 = cu[0] < cu[1] < ... < cu[N] = T with B = 1; empty: B sequences of T tokens each.
// The CUDA entry points copy what their kernels need into the workspace.
template <class Shape>
struct Packed : Shape {
  std::vector<int64_t> cu_seqlens;

  bool packed() const { return !cu_seqlens.empty(); }
  // Sequences: the rows of h0, ht, dht, dh0.
  int64_t num_seqs() const { return packed() ? int64_t(cu_seqlens.size()) - 1 : this->B; }
  // Chunks of every sequence together: each sequence is chunked from its own first token, so no
  // chunk holds two sequences (fla's chunk_indices), and a sequence of L tokens has L / C
  // rounded up. B * num_chunks() without packing.
  int64_t total_chunks() const {
    if (!packed()) return this->B * this->num_chunks();
    int64_t n = 0;
    for (size_t i = 0; i + 1 < cu_seqlens.size(); ++i)
      n += (cu_seqlens[i + 1] - cu_seqlens[i] + this->chunk - 1) / this->chunk;
    return n;
  }
};

// fail(message) (which throws) unless `cu` is N + 1 >= 2 offsets 0 = cu[0] < cu[1] < ... <
// cu[N] = T with B = 1, naming the offending entry.
template <class Fail>
void check_cu_seqlens(const std::vector<int64_t>& cu, int64_t B, int64_t T, const Fail& fail) {
  const auto at = [&](size_t i) {
    return "cu_seqlens[" + std::to_string(i) + "] = " + std::to_string(cu[i]);
  };
  if (B != 1)
    fail("cu_seqlens packs sequences into one row: B must be 1, got " + std::to_string(B));
  if (cu.size() < 2)
    fail("cu_seqlens needs at least 2 entries (0 and T), got " + std::to_string(cu.size()));
  if (cu[0] != 0) fail(at(0) + ": the first offset must be 0");
  for (size_t i = 1; i < cu.size(); ++i)
    if (cu[i] <= cu[i - 1])
      fail(at(i) + " is not greater than " + at(i - 1) + ": offsets must increase");
  if (cu.back() != T)
    fail(at(cu.size() - 1) + ": the last offset must be T = " + std::to_string(T));
}

// fail(message) (which throws) naming the first of p's sizes that is wrong: sizes, divisibility,
// chunk size, head dims, scale.
template <class Fail>
void check_sizes(const Sizes& p, const Fail& fail) {
  const std::pair<const char*, int64_t> sizes[] = {{"B", p.B},   {"T", p.T}, {"H", p.H},
                                                   {"HV", p.HV}, {"K", p.K}, {"V", p.V}};
  for (const auto& [name, value] : sizes)
    if (value < 1) fail(std::string(name) + " must be >= 1, got " + std::to_string(value));
  if (p.HV % p.H != 0)
    fail("HV (" + std::to_string(p.HV) + ") must be a multiple of H (" + std::to_string(p.H) + ")");
  if (p.chunk != 16 && p.chunk != 32 && p.chunk != 64)
    fail("chunk size " + std::to_string(p.chunk) + " is not supported (expected 16, 32 or 64)");
  if (p.K > 256) fail("K = " + std::to_string(p.K) + " exceeds the maximum key head dim 256");
  if (p.V > 512) fail("V = " + std::to_string(p.V) + " exceeds the maximum value head dim 512");
  if (!std::isfinite(p.scale) || p.scale == 0)
    fail("scale must be finite and nonzero, got " + std::to_string(p.scale));
}

// A FLOP count of docs/design.md: B T HV times the count per token and value head,
//   kv K V + C (ck K + cv V) + cc C^2 / cd.
struct FlopsPerTokenHead {
  double kv, ck, cv, cc, cd;
};
inline double flops(const Sizes& p, const FlopsPerTokenHead& f) {
  const double K = double(p.K), V = double(p.V), C = double(p.chunk);
  return double(p.B) * double(p.T) * double(p.HV) *
         (f.kv * K * V + C * (f.ck * K + f.cv * V) + f.cc * C * C / f.cd);
}

// Offsets into the time-major layouts at token `tok` of the B * T (flattened) tokens: row b's
// token t is b T + t, a packed sequence's its cu_seqlens offset + t. gate_offset: g [B, T, HV]
// (gdr) and beta; gk_offset: a per-channel g [B, T, HV, K] (kda).
inline int64_t qk_offset(const Sizes& p, int64_t tok, int64_t h) {
  return (tok * p.H + h) * p.K;
}
inline int64_t vo_offset(const Sizes& p, int64_t tok, int64_t hv) {
  return (tok * p.HV + hv) * p.V;
}
inline int64_t gate_offset(const Sizes& p, int64_t tok, int64_t hv) {
  return tok * p.HV + hv;
}
inline int64_t gk_offset(const Sizes& p, int64_t tok, int64_t hv) {
  return (tok * p.HV + hv) * p.K;
}

}  // namespace gdn::delta_rule

// Declares, in a family's namespace, the API it defines over its Problem:
//   validate(p)                 throws std::invalid_argument ("gdr: ...", "kda: ...") naming what
//                               is wrong (sizes, divisibility, chunk size, scale, cu_seqlens)
//   residual_elems(p)           Acc elements the forward saves for the backward (the state at the
//                               start of every chunk first, [sequence][HV][chunk][K][V])
//   forward_workspace_elems(p), backward_workspace_elems(p)
//                               Acc elements of CPU scratch the forward / backward need while they
//                               run (freed after)
//   forward_cpu, backward_cpu   T is float, double or bf16 (computes in acc_t<T>); they check p
//                               and the pointers, then run p's implementation. The backward
//                               expects the residual written by the forward of the same Problem.
//   forward_cuda, backward_cuda the same contract with device pointers, run on `stream` (a
//                               cudaStream_t); only with GDN_WITH_CUDA
// and names the kernels' pointers (kernels/delta_rule_args.h): Inputs, ForwardOutputs,
// BackwardArgs.
#define GDN_DELTA_RULE_DECLARE_API                                                       \
  void validate(const Problem& p);                                                       \
  int64_t residual_elems(const Problem& p);                                              \
  int64_t forward_workspace_elems(const Problem& p);                                     \
  int64_t backward_workspace_elems(const Problem& p);                                    \
  using delta_rule::BackwardArgs;                                                        \
  using delta_rule::ForwardOutputs;                                                      \
  using delta_rule::Inputs;                                                              \
  template <typename T>                                                                  \
  void forward_cpu(const Problem& p, const Inputs<T>& in, const ForwardOutputs<T>& out); \
  template <typename T>                                                                  \
  void backward_cpu(const Problem& p, const Inputs<T>& in, const BackwardArgs<T>& args); \
  GDN_DELTA_RULE_DECLARE_CUDA_API                                                        \
  double forward_flops(const Problem& p);                                                \
  double backward_flops(const Problem& p);

#if defined(GDN_WITH_CUDA)
#define GDN_DELTA_RULE_DECLARE_CUDA_API                                                  \
  template <typename T>                                                                  \
  void forward_cuda(const Problem& p, const Inputs<T>& in, const ForwardOutputs<T>& out, \
                    void* stream);                                                       \
  template <typename T>                                                                  \
  void backward_cuda(const Problem& p, const Inputs<T>& in, const BackwardArgs<T>& args, \
                     void* stream);
#else
#define GDN_DELTA_RULE_DECLARE_CUDA_API
#endif
