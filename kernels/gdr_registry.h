// The gated-delta-rule implementations as registered objects, in the spirit of mlx's Primitive:
// each of recurrent, chunked, chunked_fat, fused and ssd is one entry carrying its name, its
// residual policy, its residual and workspace sizes, and its CPU and CUDA forward and backward
// for every input type. `gdn bench`, `gdn run-kernel`, `gdn gradcheck --kernel`, the memory
// profile and the Gated DeltaNet layer all take an implementation from this one table, and
// forward_cpu / forward_cuda (gated_delta_rule.h) dispatch through it.
//
// A Problem names its entry by (impl, residual): `chunked_fat` is `chunked` with the `full`
// residual; the other implementations ignore the residual policy.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/device_kernels.h"
#include "kernels/gated_delta_rule.h"

namespace gdn::gdr {

// Each entry's kernels per device (kernels/device_kernels.h).
using CpuKernels = delta_rule::CpuKernels<Problem>;
using CudaKernels = delta_rule::CudaKernels<Problem>;

struct Implementation {
  const char* name;     // "chunked_fat"
  Impl impl;            // the kernel family
  Residual residual;    // what the forward keeps for the backward
  bool delta_rule;      // false for ssd: no beta, a benchmark baseline rather than a model kernel
  const char* summary;  // one line for --help and docs
  CpuKernels cpu;
  const CudaKernels* cuda;  // null when gdn is built without CUDA

  // Accumulator elements the forward saves for the backward (beyond inputs and outputs): the
  // fp32 chunk-start states, and A, W, U of every chunk for the `full` residual.
  int64_t residual_elems(const Problem& p) const;
  // Problem fields of this entry set on `p` (impl, residual).
  Problem configure(Problem p) const;
  // Accumulator elements of scratch on the CPU / on CUDA (in_bytes: bytes of an input element),
  // also for packed Problems whose kernels run them one sequence at a time.
  int64_t cpu_forward_workspace(const Problem& p) const;
  int64_t cpu_backward_workspace(const Problem& p) const;
  int64_t cuda_forward_workspace(const Problem& p, int64_t in_bytes) const;
  int64_t cuda_backward_workspace(const Problem& p, int64_t in_bytes) const;
};

// Every implementation, in a fixed order (recurrent, chunked, chunked_fat, fused, ssd).
const std::vector<Implementation>& implementations();
// By name (also the alias `chunked_full` of chunked_fat); throws std::invalid_argument naming the
// value and the known names.
const Implementation& find_implementation(const std::string& name);
// The entry that runs `p` (by p.impl, and p.residual for chunked).
const Implementation& implementation_of(const Problem& p);
// "recurrent, chunked, chunked_fat, fused, ssd" (delta_rule_only: without ssd).
std::string implementation_names(bool delta_rule_only = false);

#if defined(GDN_WITH_CUDA)
// The CUDA kernels of each family (kernels/cuda/gdr_dispatch.cu). `fused` runs its own kernels
// where its plan fits the device and otherwise the chunked kernels, saying so once on stderr.
const CudaKernels& cuda_kernels(Impl impl);
#endif

}  // namespace gdn::gdr
