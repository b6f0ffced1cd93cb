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
#include "kernels/delta_rule_problem.h"
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
// it (detail::sequence_problem copies this part only). The sizes and states are every delta-rule
// family's (kernels/delta_rule_problem.h).
struct ProblemShape : delta_rule::Sizes {
  Impl impl = Impl::chunked;
  Residual residual = Residual::minimal;
  // CUDA fused kernels only: the V tile and the kernels' chunk (0: the plan's choice; 16, 32 or
  // 64 force one: model.fused_vt, model.fused_sub; the kernel lab's variants).
  int64_t fused_vt = 0, fused_sub = 0;
};

// A ProblemShape with packed sequences (delta_rule::Packed: cu_seqlens, packed(), num_seqs(),
// total_chunks()).
struct Problem : delta_rule::Packed<ProblemShape> {};

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

// The chunk run when none is given (chunk size 0, model.chunk_size 0): the CPU's chunked and
// fused kernels do C(6K + 4V) + C^2/3 multiply-adds per token-head beyond the state's 6KV, so
// smaller chunks do less work until their GEMMs get too thin: `gdn bench` fwd_bwd is fastest at
// C = 16 for K, V <= 64, 32 up to 128 and 64 beyond (docs/benchmarks/cpu-vs-pytorch.md). CUDA
// runs 64 (its kernels pick sub-chunks themselves); meta counts what the CPU would (a caller
// predicting a CUDA run on meta resolves the chunk for CUDA first); the recurrent kernels use C
// only as the residual's step: 64.
inline int auto_chunk(bool on_cuda, Impl impl, int64_t K, int64_t V) {
  if (on_cuda || impl == Impl::recurrent) return 64;
  const int64_t widest = K > V ? K : V;
  return widest <= 64 ? 16 : widest <= 128 ? 32 : 64;
}

// validate, residual_elems, the workspace sizes, the CPU and CUDA entry points
// (kernels/delta_rule_problem.h). Each implementation is sized and run through its registry
// entry.
GDN_DELTA_RULE_DECLARE_API

// The FLOP counts of docs/design.md ("The gated delta rule") per token-head, for GFLOP/s and
// fraction of peak: forward 6KV + C(6K + 4V) + C^2/3, backward 16KV + C(18K + 10V) + 4C^2. The
// same count is used for every implementation (ssd included) so GFLOP/s compare run times.
inline double forward_flops(const Problem& p) {
  return delta_rule::flops(p, {6, 6, 4, 1, 3});
}
inline double backward_flops(const Problem& p) {
  return delta_rule::flops(p, {16, 18, 10, 4, 1});
}

}  // namespace gdn::gdr
