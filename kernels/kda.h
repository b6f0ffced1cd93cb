// Kimi Delta Attention (KDA, flash-linear-attention's `kda`): the gated delta rule with a decay
// per key channel instead of one per head. The kernel API, shared by every implementation (CPU
// and CUDA), and the registry of implementations (as kernels/gdr_registry.h is for gdr).
//
// Layout (fla's, time-major, contiguous, row-major):
//   q, k [B, T, H, K]   v, o [B, T, HV, V]   g [B, T, HV, K]   beta [B, T, HV]   h0, ht [N, HV, K,
//   V]
// g is the per-channel LOG decay (<= 0 in use). N = B, or with packed sequences (cu_seqlens, B = 1)
// the number of sequences, each run alone from its own h0 row to its own ht row. HV is a multiple
// of H; value head i reads key head i / (HV / H). Per (sequence, value head), state S (K x V),
// scale = K^-1/2 unless given:
//   S = Diag(exp(g_t)) S;  u = beta_t (v_t - S^T k_t);  S = S + k_t u^T;  o_t = S^T (scale q_t)
//
// Kernels never allocate: the caller asks for the sizes below (counts of Acc elements), allocates
// and passes pointers. docs/design.md section 4.11 derives the chunked form and its numerics.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/delta_rule_problem.h"
#include "kernels/device_kernels.h"
#include "kernels/enum_table.h"
#include "kernels/gated_delta_rule.h"
#include "kernels/numeric.h"

namespace gdn::kda {

enum class Impl { recurrent, chunked };

// The chunk run when none is given (chunk size 0): 64 on every device. Unlike the gated delta
// rule's, the CPU's chunked KDA kernel is fastest at 64 for K = V = 64 (`gdn bench --op kda`).
inline constexpr int kAutoChunk = 64;

inline constexpr EnumEntry<Impl> kImplNames[] = {{Impl::recurrent, "recurrent"},
                                                 {Impl::chunked, "chunked"}};
inline EnumTable<Impl> enum_table(Impl) {
  return kImplNames;
}
inline const char* impl_name(Impl impl) {
  return enum_name(impl);
}
// Throws std::invalid_argument naming the value and the choices.
Impl parse_impl(const std::string& name);

// Every field of a Problem but its packing: the sizes and states every delta-rule family has
// (kernels/delta_rule_problem.h; chunk is also the recurrent kernel's checkpoint interval) and the
// implementation.
struct ProblemShape : delta_rule::Sizes {
  Impl impl = Impl::chunked;
};

// A ProblemShape with packed sequences (delta_rule::Packed: cu_seqlens, packed(), num_seqs(),
// total_chunks(), each sequence chunked from its own first token).
struct Problem : delta_rule::Packed<ProblemShape> {
  // The same sizes and packing as a gated-delta-rule Problem, for the sequence and slice helpers
  // both families share (gdr::sequences, the CPU slice loop).
  gdr::Problem as_gdr() const;
};

// validate ("kda: ..."), residual_elems (the state at the start of every chunk of every
// (sequence, value head), [sequence][HV][chunk][K][V], every implementation the same), the CPU
// workspace sizes of p.impl and the entry points (the CUDA ones size their workspaces through the
// registry entry's cuda kernels): kernels/delta_rule_problem.h.
GDN_DELTA_RULE_DECLARE_API

// FLOPs of docs/design.md section 4.11 per token-head (the chunked form's count; recurrent is
// timed against it): forward 6KV + C(2K + 2V) + C^2/3, backward 14KV + C(6K + 5V) + C^2/3.
inline double forward_flops(const Problem& p) {
  return delta_rule::flops(p, {6, 2, 2, 1, 3});
}
inline double backward_flops(const Problem& p) {
  return delta_rule::flops(p, {14, 6, 5, 1, 3});
}

// ---- the registry ------------------------------------------------------------------------------

// Each entry's kernels per device (kernels/device_kernels.h); every kernel runs packed sequences
// itself.
using CpuKernels = delta_rule::CpuKernels<Problem>;
using CudaKernels = delta_rule::CudaKernels<Problem>;

struct Implementation {
  const char* name;     // "chunked"
  Impl impl;            // the kernel family
  const char* summary;  // one line for --help and docs
  CpuKernels cpu;
  const CudaKernels* cuda;  // null when gdn is built without CUDA

  Problem configure(Problem p) const {
    p.impl = impl;
    return p;
  }
  int64_t cpu_forward_workspace(const Problem& p) const { return cpu.forward_workspace(p, 0); }
  int64_t cpu_backward_workspace(const Problem& p) const { return cpu.backward_workspace(p, 0); }
  // Throws std::invalid_argument when gdn was built without CUDA.
  int64_t cuda_forward_workspace(const Problem& p, int64_t in_bytes) const;
  int64_t cuda_backward_workspace(const Problem& p, int64_t in_bytes) const;
};

// Every implementation, in a fixed order (recurrent, chunked).
const std::vector<Implementation>& implementations();
// By name; throws std::invalid_argument naming the value and the known names.
const Implementation& find_implementation(const std::string& name);
// The entry that runs p (by p.impl).
const Implementation& implementation_of(const Problem& p);
// "recurrent, chunked".
std::string implementation_names();

#if defined(GDN_WITH_CUDA)
// The CUDA kernels of each implementation (kernels/cuda/kda_dispatch.cu).
const CudaKernels& cuda_kernels(Impl impl);
#endif

}  // namespace gdn::kda
