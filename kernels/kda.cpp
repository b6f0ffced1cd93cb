// The Kimi Delta Attention API (kernels/kda.h): names, validation, sizes, the table
// of implementations and the entry points, which check their arguments and run an entry.
#include "kernels/kda.h"

#include <stdexcept>
#include <string>

#include "kernels/cpu/kda_internal.h"
#include "kernels/registry_cuda.h"

namespace gdn::kda {

namespace {
[[noreturn]] void fail(const std::string& msg) {
  throw std::invalid_argument("kda: " + msg);
}
}  // namespace

Impl parse_impl(const std::string& name) {
  if (auto v = enum_table(Impl{}).parse(name)) return *v;
  fail("unknown implementation '" + name + "' (expected " + enum_table(Impl{}).choices() + ")");
}

gdr::Problem Problem::as_gdr() const {
  gdr::Problem p;
  static_cast<delta_rule::Sizes&>(p) = *this;
  p.cu_seqlens = cu_seqlens;
  return p;
}

void validate(const Problem& p) {
  delta_rule::check_sizes(p, fail);
  if (std::string(impl_name(p.impl)) == "unknown")
    fail("unknown implementation id " + std::to_string(int(p.impl)));
  if (p.packed()) delta_rule::check_cu_seqlens(p.cu_seqlens, p.B, p.T, fail);
}

int64_t residual_elems(const Problem& p) {
  return p.total_chunks() * p.HV * p.K * p.V;
}

int64_t forward_workspace_elems(const Problem& p) {
  return implementation_of(p).cpu_forward_workspace(p);
}

int64_t backward_workspace_elems(const Problem& p) {
  return implementation_of(p).cpu_backward_workspace(p);
}

// ---- the registry ------------------------------------------------------------------------------

namespace {

std::vector<Implementation> make_table() {
  return {
      {"recurrent", Impl::recurrent, "the readable reference, one step at a time (fp64-capable)",
       GDN_DELTA_RULE_CPU_KERNELS(recurrent), delta_rule::cuda_of<CudaKernels>(Impl::recurrent)},
      {"chunked", Impl::chunked,
       "the WY/UT matmul form with per-channel decays relative to sub-chunk reference rows",
       GDN_DELTA_RULE_CPU_KERNELS(chunked), delta_rule::cuda_of<CudaKernels>(Impl::chunked)},
  };
}

const CudaKernels& cuda_or_fail(const Implementation& i) {
  if (!i.cuda) fail("gdn was built without CUDA");
  return *i.cuda;
}

#if defined(GDN_WITH_CUDA)
// The entry's CUDA kernels for T; throws naming the implementation where it has none.
template <typename T>
const CudaKernels::Pair<T>& cuda_pair(const Implementation& i) {
  const auto& pair = cuda_or_fail(i).of<T>();
  if (!pair.forward || !pair.backward)
    fail(std::string("implementation '") + i.name + "' has no CUDA kernel in this build");
  return pair;
}
#endif

}  // namespace

int64_t Implementation::cuda_forward_workspace(const Problem& p, int64_t in_bytes) const {
  return cuda_or_fail(*this).forward_workspace(p, in_bytes);
}
int64_t Implementation::cuda_backward_workspace(const Problem& p, int64_t in_bytes) const {
  return cuda_or_fail(*this).backward_workspace(p, in_bytes);
}

const std::vector<Implementation>& implementations() {
  static const std::vector<Implementation> table = make_table();
  return table;
}

std::string implementation_names() {
  std::string s;
  for (const Implementation& i : implementations())
    s += (s.empty() ? "" : ", ") + std::string(i.name);
  return s;
}

const Implementation& find_implementation(const std::string& name) {
  for (const Implementation& i : implementations())
    if (name == i.name) return i;
  fail("unknown implementation '" + name + "' (known: " + implementation_names() + ")");
}

const Implementation& implementation_of(const Problem& p) {
  for (const Implementation& i : implementations())
    if (i.impl == p.impl) return i;
  fail("no implementation for id " + std::to_string(int(p.impl)));
}

// ---- entry points ------------------------------------------------------------------------------

template <typename T>
void forward_cpu(const Problem& p, const Inputs<T>& in, const ForwardOutputs<T>& out) {
  detail::check_forward_args(p, in, out, forward_workspace_elems(p), "CPU");
  implementation_of(p).cpu.of<T>().forward(p, in, out);
}

template <typename T>
void backward_cpu(const Problem& p, const Inputs<T>& in, const BackwardArgs<T>& args) {
  detail::check_backward_args(p, in, args, backward_workspace_elems(p), "CPU");
  implementation_of(p).cpu.of<T>().backward(p, in, args);
}

#if defined(GDN_WITH_CUDA)
template <typename T>
void forward_cuda(const Problem& p, const Inputs<T>& in, const ForwardOutputs<T>& out,
                  void* stream) {
  const Implementation& impl = implementation_of(p);
  const int64_t in_bytes = int64_t(sizeof(T));
  detail::check_forward_args(p, in, out, impl.cuda_forward_workspace(p, in_bytes), "CUDA");
  cuda_pair<T>(impl).forward(p, in, out, stream);
}

template <typename T>
void backward_cuda(const Problem& p, const Inputs<T>& in, const BackwardArgs<T>& args,
                   void* stream) {
  const Implementation& impl = implementation_of(p);
  const int64_t in_bytes = int64_t(sizeof(T));
  detail::check_backward_args(p, in, args, impl.cuda_backward_workspace(p, in_bytes), "CUDA");
  cuda_pair<T>(impl).backward(p, in, args, stream);
}
#endif

#define GDN_KDA_INSTANTIATE_ENTRY(T)                                                        \
  template void forward_cpu<T>(const Problem&, const Inputs<T>&, const ForwardOutputs<T>&); \
  template void backward_cpu<T>(const Problem&, const Inputs<T>&, const BackwardArgs<T>&);
GDN_KDA_INSTANTIATE_ENTRY(float)
GDN_KDA_INSTANTIATE_ENTRY(double)
GDN_KDA_INSTANTIATE_ENTRY(bf16)
#undef GDN_KDA_INSTANTIATE_ENTRY

#if defined(GDN_WITH_CUDA)
#define GDN_KDA_INSTANTIATE_CUDA(T)                                                         \
  template void forward_cuda<T>(const Problem&, const Inputs<T>&, const ForwardOutputs<T>&, \
                                void*);                                                     \
  template void backward_cuda<T>(const Problem&, const Inputs<T>&, const BackwardArgs<T>&, void*);
GDN_KDA_INSTANTIATE_CUDA(float)
GDN_KDA_INSTANTIATE_CUDA(double)
GDN_KDA_INSTANTIATE_CUDA(bf16)
#undef GDN_KDA_INSTANTIATE_CUDA
#endif

}  // namespace gdn::kda
