// The gated delta rule API (kernels/gated_delta_rule.h): names, validation, and
// the CPU entry points, which size and run each implementation through its registry entry
// (kernels/gdr_registry.h).
#include "kernels/gated_delta_rule.h"

#include <stdexcept>
#include <string>

#include "kernels/gdr_checks.h"
#include "kernels/gdr_registry.h"
#include "kernels/gdr_split.h"

namespace gdn::gdr {

namespace {
[[noreturn]] void fail(const std::string& msg) {
  throw std::invalid_argument("gdr: " + msg);
}

template <typename E>
E parse(const std::string& name, const char* what) {
  if (auto v = enum_table(E{}).parse(name)) return *v;
  fail("unknown " + std::string(what) + " '" + name + "' (expected " + enum_table(E{}).choices() +
       ")");
}

}  // namespace

Impl parse_impl(const std::string& name) {
  return parse<Impl>(name, "implementation");
}

Residual parse_residual(const std::string& name) {
  return parse<Residual>(name, "residual policy");
}

Sequences sequences(const Problem& p) {
  Sequences s;
  const int64_t n = p.num_seqs();
  s.token.resize(n + 1);
  s.chunk.resize(n + 1);
  for (int64_t i = 0; i <= n; ++i) s.token[i] = p.packed() ? p.cu_seqlens[i] : i * p.T;
  s.chunk[0] = 0;
  for (int64_t i = 0; i < n; ++i)
    s.chunk[i + 1] = s.chunk[i] + (s.token[i + 1] - s.token[i] + p.chunk - 1) / p.chunk;
  return s;
}

void validate_cu_seqlens(const std::vector<int64_t>& cu, int64_t B, int64_t T) {
  delta_rule::check_cu_seqlens(cu, B, T, fail);
}

void validate(const Problem& p) {
  delta_rule::check_sizes(p, fail);
  if (p.packed()) validate_cu_seqlens(p.cu_seqlens, p.B, p.T);
  if (std::string(impl_name(p.impl)) == "unknown")
    fail("unknown implementation id " + std::to_string(int(p.impl)));
  if (std::string(residual_name(p.residual)) == "unknown")
    fail("unknown residual policy id " + std::to_string(int(p.residual)));
}

int64_t residual_elems(const Problem& p) {
  return implementation_of(p).residual_elems(p);
}

int64_t forward_workspace_elems(const Problem& p) {
  return implementation_of(p).cpu_forward_workspace(p);
}

int64_t backward_workspace_elems(const Problem& p) {
  return implementation_of(p).cpu_backward_workspace(p);
}

template <typename T>
void forward_cpu(const Problem& p, const Inputs<T>& in, const ForwardOutputs<T>& out) {
  detail::check_forward_args(p, in, out, forward_workspace_elems(p), "CPU");
  const Implementation& impl = implementation_of(p);
  const auto forward = impl.cpu.of<T>().forward;
  if (!p.packed() || impl.cpu.packed) return forward(p, in, out);
  detail::forward_by_sequence(p, in, out, forward,
                              [&](const Problem& one) { return impl.residual_elems(one); });
}

template <typename T>
void backward_cpu(const Problem& p, const Inputs<T>& in, const BackwardArgs<T>& args) {
  detail::check_backward_args(p, in, args, backward_workspace_elems(p), "CPU");
  const Implementation& impl = implementation_of(p);
  const auto backward = impl.cpu.of<T>().backward;
  if (!p.packed() || impl.cpu.packed) return backward(p, in, args);
  detail::backward_by_sequence(p, in, args, backward,
                               [&](const Problem& one) { return impl.residual_elems(one); });
}

template void forward_cpu<float>(const Problem&, const Inputs<float>&,
                                 const ForwardOutputs<float>&);
template void forward_cpu<double>(const Problem&, const Inputs<double>&,
                                  const ForwardOutputs<double>&);
template void forward_cpu<bf16>(const Problem&, const Inputs<bf16>&, const ForwardOutputs<bf16>&);
template void backward_cpu<float>(const Problem&, const Inputs<float>&, const BackwardArgs<float>&);
template void backward_cpu<double>(const Problem&, const Inputs<double>&,
                                   const BackwardArgs<double>&);
template void backward_cpu<bf16>(const Problem&, const Inputs<bf16>&, const BackwardArgs<bf16>&);

}  // namespace gdn::gdr
