// The gated delta rule API (kernels/gated_delta_rule.h): names, validation, FLOP counts, and
// the CPU entry points, which size and run each implementation through its registry entry
// (kernels/gdr_registry.h).
#include "kernels/gated_delta_rule.h"

#include <cmath>
#include <stdexcept>
#include <string>
#include <utility>

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

int64_t Problem::total_chunks() const {
  if (!packed()) return B * num_chunks();
  int64_t n = 0;
  for (size_t i = 0; i + 1 < cu_seqlens.size(); ++i)
    n += (cu_seqlens[i + 1] - cu_seqlens[i] + chunk - 1) / chunk;
  return n;
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

// Per token-head: forward 6KV + C(6K + 4V) + C^2/3, backward 16KV + C(18K + 10V) + 4C^2. The
// same count is used for every implementation (ssd included) so GFLOP/s compare run times.
double forward_flops(const Problem& p) {
  const double K = double(p.K), V = double(p.V), C = double(p.chunk);
  return double(p.B) * double(p.T) * double(p.HV) * (6 * K * V + C * (6 * K + 4 * V) + C * C / 3);
}

double backward_flops(const Problem& p) {
  const double K = double(p.K), V = double(p.V), C = double(p.chunk);
  return double(p.B) * double(p.T) * double(p.HV) *
         (16 * K * V + C * (18 * K + 10 * V) + 4 * C * C);
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
