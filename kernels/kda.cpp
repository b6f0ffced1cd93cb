// The Kimi Delta Attention API (kernels/kda.h): names, validation, sizes, FLOP counts, the table
// of implementations and the entry points, which check their arguments and run an entry.
#include "kernels/kda.h"

#include <cmath>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <utility>

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
  p.B = B;
  p.T = T;
  p.H = H;
  p.HV = HV;
  p.K = K;
  p.V = V;
  p.chunk = chunk;
  p.scale = scale;
  p.has_h0 = has_h0;
  p.want_ht = want_ht;
  p.cu_seqlens = cu_seqlens;
  return p;
}

void validate(const Problem& p) {
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
  if (std::string(impl_name(p.impl)) == "unknown")
    fail("unknown implementation id " + std::to_string(int(p.impl)));
  if (p.packed()) {
    try {
      gdr::validate_cu_seqlens(p.cu_seqlens, p.B, p.T);
    } catch (const std::invalid_argument& e) {
      fail(std::string(e.what()).substr(5));  // drop gdr's "gdr: " prefix
    }
  }
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

// Per token-head (docs/design.md 4.11): forward 6KV + C(2K + 2V) + C^2/3, backward
// 14KV + C(6K + 5V) + C^2/3.
double forward_flops(const Problem& p) {
  const double K = double(p.K), V = double(p.V), C = double(p.chunk);
  return double(p.B) * double(p.T) * double(p.HV) * (6 * K * V + C * (2 * K + 2 * V) + C * C / 3);
}

double backward_flops(const Problem& p) {
  const double K = double(p.K), V = double(p.V), C = double(p.chunk);
  return double(p.B) * double(p.T) * double(p.HV) * (14 * K * V + C * (6 * K + 5 * V) + C * C / 3);
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

namespace detail {

void require(std::initializer_list<Required> pointers, const Problem& p, const char* device) {
  for (const Required& r : pointers)
    if (r.needed && !r.ptr)
      fail(std::string(r.what) + " is null (impl " + impl_name(p.impl) + ", " + device + ")");
}

}  // namespace detail

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
