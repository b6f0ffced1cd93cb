// The table of gated-delta-rule implementations (kernels/gdr_registry.h): one entry each, with
// the CPU kernels of kernels/cpu/gdr_*.cpp and the CUDA kernels of kernels/cuda/gdr_dispatch.cu.
#include "kernels/gdr_registry.h"

#include <stdexcept>

#include "kernels/cpu/gdr_internal.h"
#include "kernels/gdr_split.h"
#include "kernels/registry_cuda.h"

namespace gdn::gdr {

namespace {

std::vector<Implementation> make_table() {
  return {
      {"recurrent", Impl::recurrent, Residual::minimal, true,
       "the readable reference, one step at a time (fp64-capable)",
       GDN_DELTA_RULE_CPU_KERNELS(recurrent), delta_rule::cuda_of<CudaKernels>(Impl::recurrent)},
      {"chunked", Impl::chunked, Residual::minimal, true,
       "the WY/UT matmul form from GEMMs; saves the chunk-start states",
       GDN_DELTA_RULE_CPU_KERNELS(chunked), delta_rule::cuda_of<CudaKernels>(Impl::chunked)},
      {"chunked_fat", Impl::chunked, Residual::full, true,
       "chunked that also saves W, U and A of every chunk (memory for speed)",
       GDN_DELTA_RULE_CPU_KERNELS(chunked), delta_rule::cuda_of<CudaKernels>(Impl::chunked)},
      {"fused", Impl::fused, Residual::minimal, true,
       "one pass per (batch, head) with all chunk-local work in cache / shared memory",
       GDN_DELTA_RULE_CPU_KERNELS(fused), delta_rule::cuda_of<CudaKernels>(Impl::fused)},
      {"ssd", Impl::ssd, Residual::minimal, false,
       "scalar-decay linear attention without the delta rule (a baseline)",
       GDN_DELTA_RULE_CPU_KERNELS(ssd), delta_rule::cuda_of<CudaKernels>(Impl::ssd)},
  };
}

}  // namespace

int64_t Implementation::residual_elems(const Problem& p) const {
  int64_t n = detail::states_elems(p);
  if (residual == Residual::full) n += detail::full_a_elems(p) + detail::full_wu_elems(p);
  return n;
}

namespace {
// A device's workspace for p: its own size, or with packing through kernels that do not take it,
// the largest over the sequences (they run one at a time on one workspace).
template <class Kernels>
int64_t workspace_of(const Kernels& k, int64_t (*size)(const Problem&, int64_t), const Problem& p,
                     int64_t in_bytes) {
  if (!p.packed() || k.packed) return size(p, in_bytes);
  return detail::max_over_sequences(p, [&](const Problem& one) { return size(one, in_bytes); });
}
}  // namespace

int64_t Implementation::cpu_forward_workspace(const Problem& p) const {
  return workspace_of(cpu, cpu.forward_workspace, p, 0);
}
int64_t Implementation::cpu_backward_workspace(const Problem& p) const {
  return workspace_of(cpu, cpu.backward_workspace, p, 0);
}
int64_t Implementation::cuda_forward_workspace(const Problem& p, int64_t in_bytes) const {
  if (!cuda) throw std::invalid_argument("gdr: gdn was built without CUDA");
  return workspace_of(*cuda, cuda->forward_workspace, p, in_bytes);
}
int64_t Implementation::cuda_backward_workspace(const Problem& p, int64_t in_bytes) const {
  if (!cuda) throw std::invalid_argument("gdr: gdn was built without CUDA");
  return workspace_of(*cuda, cuda->backward_workspace, p, in_bytes);
}

Problem Implementation::configure(Problem p) const {
  p.impl = impl;
  p.residual = residual;
  return p;
}

const std::vector<Implementation>& implementations() {
  static const std::vector<Implementation> table = make_table();
  return table;
}

std::string implementation_names(bool delta_rule_only) {
  std::string s;
  for (const Implementation& i : implementations()) {
    if (delta_rule_only && !i.delta_rule) continue;
    s += (s.empty() ? "" : ", ") + std::string(i.name);
  }
  return s;
}

const Implementation& find_implementation(const std::string& name) {
  const std::string key = name == "chunked_full" ? "chunked_fat" : name;
  for (const Implementation& i : implementations())
    if (key == i.name) return i;
  throw std::invalid_argument("gdr: unknown implementation '" + name +
                              "' (known: " + implementation_names() + ")");
}

const Implementation& implementation_of(const Problem& p) {
  const Residual r = p.impl == Impl::chunked ? p.residual : Residual::minimal;
  for (const Implementation& i : implementations())
    if (i.impl == p.impl && i.residual == r) return i;
  throw std::invalid_argument("gdr: no implementation for id " + std::to_string(int(p.impl)));
}

}  // namespace gdn::gdr
