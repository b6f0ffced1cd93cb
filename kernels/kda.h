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

#include "kernels/device_kernels.h"
#include "kernels/enum_table.h"
#include "kernels/gated_delta_rule.h"
#include "kernels/numeric.h"

namespace gdn::kda {

enum class Impl { recurrent, chunked };

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

struct Problem {
  int64_t B = 1, T = 1, H = 1, HV = 1, K = 64, V = 64;
  int chunk = 64;    // chunk size C: 16, 32 or 64 (also the recurrent kernel's checkpoint interval)
  double scale = 0;  // resolved by the caller; 0 is not allowed
  Impl impl = Impl::chunked;
  bool has_h0 = false;   // an initial state is given
  bool want_ht = false;  // the final state is written
  // Packed sequences (fla's cu_seqlens, host offsets 0 = cu[0] < ... < cu[N] = T, B = 1); empty:
  // B sequences of T tokens.
  std::vector<int64_t> cu_seqlens;

  bool packed() const { return !cu_seqlens.empty(); }
  int64_t num_seqs() const { return packed() ? int64_t(cu_seqlens.size()) - 1 : B; }
  int64_t group() const { return HV / H; }  // value heads per key head
  // Chunks of all sequences together, each chunked from its own first token.
  int64_t total_chunks() const { return as_gdr().total_chunks(); }
  // The same sizes and packing as a gated-delta-rule Problem, for the sequence and slice helpers
  // both families share (gdr::sequences, the CPU slice loop).
  gdr::Problem as_gdr() const;
};

// Throws std::invalid_argument ("kda: ...") naming what is wrong (sizes, divisibility, chunk size,
// scale, cu_seqlens).
void validate(const Problem& p);

// Acc elements the forward saves for the backward: the state at the start of every chunk of
// every (sequence, value head), [sequence][HV][chunk][K][V] (every implementation, the same).
int64_t residual_elems(const Problem& p);
// Acc elements of CPU scratch the forward / backward of p.impl need while they run.
int64_t forward_workspace_elems(const Problem& p);
int64_t backward_workspace_elems(const Problem& p);

// The kernels' pointers (kernels/delta_rule_args.h).
using delta_rule::BackwardArgs;
using delta_rule::ForwardOutputs;
using delta_rule::Inputs;

// CPU entry points (T: float, double, bf16; computes in acc_t<T>); they validate p and the
// pointers, then run p.impl's registry entry. The backward expects the forward's residual.
template <typename T>
void forward_cpu(const Problem& p, const Inputs<T>& in, const ForwardOutputs<T>& out);
template <typename T>
void backward_cpu(const Problem& p, const Inputs<T>& in, const BackwardArgs<T>& args);

#if defined(GDN_WITH_CUDA)
// CUDA entry points (device pointers, run on `stream`, a cudaStream_t); workspace sizes through
// the registry entry's cuda kernels.
template <typename T>
void forward_cuda(const Problem& p, const Inputs<T>& in, const ForwardOutputs<T>& out,
                  void* stream);
template <typename T>
void backward_cuda(const Problem& p, const Inputs<T>& in, const BackwardArgs<T>& args,
                   void* stream);
#endif

// FLOPs of docs/design.md section 4.11 (the chunked form's count; recurrent is timed against it).
double forward_flops(const Problem& p);
double backward_flops(const Problem& p);

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
