// The gated delta rule kernel API, shared by every implementation (CPU and CUDA).
//
// Layout (flash-linear-attention's, time-major, contiguous, row-major):
//   q, k [B, T, H, K]   v, o [B, T, HV, V]   g, beta [B, T, HV]   h0, ht [N, HV, K, V]
// N = B, or with packed sequences (Problem::cu_seqlens, fla's convention: B = 1) the number of
// sequences: sequence n is tokens [cu_seqlens[n], cu_seqlens[n + 1]) and runs from its own h0[n]
// to its own ht[n], as if it were alone (dht, dh0 likewise).
// HV is a multiple of H; value head i reads key head i / (HV / H).
// Per (b, value head), with state S (K x V), scale = K^-1/2 unless given:
//   S = S * exp(g_t);  u = beta_t (v_t - S^T k_t);  S = S + k_t u^T;  o_t = S^T (scale q_t)
// `ssd` drops the delta rule (no beta): S = exp(g_t) S + k_t v_t^T; o_t = S^T (scale q_t).
//
// Kernels never allocate: the caller asks for the sizes below, allocates (so that the memory
// profiler sees every byte, tagged) and passes pointers. Sizes are counts of Acc elements.
// Each implementation is an entry of kernels/gdr_registry.h; the entry points below dispatch
// through it.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/delta_rule_args.h"
#include "kernels/enum_table.h"
#include "kernels/numeric.h"

namespace gdn::gdr {

enum class Impl { recurrent, chunked, fused, ssd };
// What the forward keeps for the backward besides the inputs: `minimal` the fp32 state at the
// start of every chunk; `full` also W, U and A of every chunk (chunked only; the seed's
// chunked_fat). Other implementations ignore it.
enum class Residual { minimal, full };

inline constexpr EnumEntry<Impl> kImplNames[] = {{Impl::recurrent, "recurrent"},
                                                 {Impl::chunked, "chunked"},
                                                 {Impl::fused, "fused"},
                                                 {Impl::ssd, "ssd"}};
inline constexpr EnumEntry<Residual> kResidualNames[] = {{Residual::minimal, "minimal"},
                                                         {Residual::full, "full"}};
inline EnumTable<Impl> enum_table(Impl) {
  return kImplNames;
}
inline EnumTable<Residual> enum_table(Residual) {
  return kResidualNames;
}

inline const char* impl_name(Impl impl) {
  return enum_name(impl);
}
inline const char* residual_name(Residual r) {
  return enum_name(r);
}
// Throw std::invalid_argument naming the value and the choices.
Impl parse_impl(const std::string& name);
Residual parse_residual(const std::string& name);

// Every field of a Problem but its packing: what each sequence of a packed Problem shares with
// it (detail::sequence_problem copies this part only).
struct ProblemShape {
  int64_t B = 1, T = 1, H = 1, HV = 1, K = 64, V = 64;
  int chunk = 64;    // chunk size C: 16, 32 or 64
  double scale = 0;  // resolved by the caller; 0 is not allowed
  Impl impl = Impl::chunked;
  Residual residual = Residual::minimal;
  bool has_h0 = false;   // an initial state is given
  bool want_ht = false;  // the final state is written
  // CUDA fused kernels only: the V tile and the kernels' chunk (0: the plan's choice; 16, 32 or
  // 64 force one: model.fused_vt, model.fused_sub; the kernel lab's variants).
  int64_t fused_vt = 0, fused_sub = 0;
};

struct Problem : ProblemShape {
  // Packed sequences (fla's cu_seqlens, N + 1 offsets, 0 = cu[0] < cu[1] < ... < cu[N] = T,
  // B = 1); empty: B sequences of T tokens each. Host memory: the CUDA entry points copy what
  // their kernels need into the workspace.
  std::vector<int64_t> cu_seqlens;
  bool packed() const { return !cu_seqlens.empty(); }
  // Sequences: the rows of h0, ht, dht, dh0.
  int64_t num_seqs() const { return packed() ? int64_t(cu_seqlens.size()) - 1 : B; }
  // Chunks of one unpacked row (T / C rounded up); with packing see Sequences.
  int64_t num_chunks() const { return (T + chunk - 1) / chunk; }
  // Chunks of every sequence together: each sequence is chunked from its own first token, so no
  // chunk holds two sequences (fla's chunk_indices), and a sequence of L tokens has L / C
  // rounded up. B * num_chunks() without packing.
  int64_t total_chunks() const;
  int64_t group() const { return HV / H; }  // value heads per key head
};

// The sequences of a Problem as offsets over the B * T tokens and over all chunks.
struct Sequences {
  std::vector<int64_t> token;  // N + 1: sequence n is tokens [token[n], token[n + 1])
  std::vector<int64_t> chunk;  // N + 1: its chunks are [chunk[n], chunk[n + 1])
  int64_t count() const { return int64_t(token.size()) - 1; }
  int64_t len(int64_t n) const { return token[n + 1] - token[n]; }
  int64_t chunks(int64_t n) const { return chunk[n + 1] - chunk[n]; }
  int64_t total_chunks() const { return chunk.back(); }
};
// Without packing: token[n] = n T, chunk[n] = n * num_chunks().
Sequences sequences(const Problem& p);

// Throws std::invalid_argument naming `cu_seqlens` and the offending entry unless `cu` is N + 1 >=
// 2 offsets 0 = cu[0] < cu[1] < ... < cu[N] = T with B = 1.
void validate_cu_seqlens(const std::vector<int64_t>& cu, int64_t B, int64_t T);

// Throws std::invalid_argument naming what is wrong (sizes, divisibility, chunk size, scale,
// cu_seqlens).
void validate(const Problem& p);

// Acc elements the forward saves for the backward (beyond the inputs and outputs).
int64_t residual_elems(const Problem& p);
// Acc elements of scratch the forward / backward need while they run (freed after).
int64_t forward_workspace_elems(const Problem& p);
int64_t backward_workspace_elems(const Problem& p);

// The kernels' pointers (kernels/delta_rule_args.h).
using delta_rule::BackwardArgs;
using delta_rule::ForwardOutputs;
using delta_rule::Inputs;

// CPU implementations; T is float, double or bf16 (computes in acc_t<T>). The backward expects
// the residual written by the forward of the same Problem.
template <typename T>
void forward_cpu(const Problem& p, const Inputs<T>& in, const ForwardOutputs<T>& out);
template <typename T>
void backward_cpu(const Problem& p, const Inputs<T>& in, const BackwardArgs<T>& args);

#if defined(GDN_WITH_CUDA)
// CUDA implementations (same contract; pointers are device pointers; runs on `stream`).
template <typename T>
void forward_cuda(const Problem& p, const Inputs<T>& in, const ForwardOutputs<T>& out,
                  void* stream);
template <typename T>
void backward_cuda(const Problem& p, const Inputs<T>& in, const BackwardArgs<T>& args,
                   void* stream);
#endif

// The FLOP counts of docs/design.md ("The gated delta rule") per token-head, for GFLOP/s and
// fraction of peak.
double forward_flops(const Problem& p);
double backward_flops(const Problem& p);

}  // namespace gdn::gdr
