// The gated delta rule API (kernels/gated_delta_rule.h): names, validation, residual and
// workspace sizes, FLOP counts, and the CPU dispatchers to kernels/cpu/gdr_*.cpp.
#include "kernels/gated_delta_rule.h"

#include <cmath>
#include <stdexcept>
#include <string>
#include <utility>

#include "kernels/cpu/gdr_internal.h"

namespace gdn::gdr {

namespace {
[[noreturn]] void fail(const std::string& msg) {
  throw std::invalid_argument("gdr: " + msg);
}

void check_impl(Impl impl) {
  switch (impl) {
    case Impl::recurrent:
    case Impl::chunked:
    case Impl::fused:
    case Impl::ssd:
      return;
  }
  fail("unknown implementation id " + std::to_string(int(impl)));
}

void require(const void* ptr, const char* what, const Problem& p) {
  if (!ptr) fail(std::string(what) + " is null (impl " + impl_name(p.impl) + ")");
}
}  // namespace

const char* impl_name(Impl impl) {
  switch (impl) {
    case Impl::recurrent:
      return "recurrent";
    case Impl::chunked:
      return "chunked";
    case Impl::fused:
      return "fused";
    case Impl::ssd:
      return "ssd";
  }
  return "unknown";
}

Impl parse_impl(const std::string& name) {
  for (Impl i : {Impl::recurrent, Impl::chunked, Impl::fused, Impl::ssd})
    if (name == impl_name(i)) return i;
  fail("unknown implementation '" + name + "' (expected recurrent, chunked, fused or ssd)");
}

const char* residual_name(Residual r) {
  switch (r) {
    case Residual::minimal:
      return "minimal";
    case Residual::full:
      return "full";
  }
  return "unknown";
}

Residual parse_residual(const std::string& name) {
  if (name == "minimal") return Residual::minimal;
  if (name == "full") return Residual::full;
  fail("unknown residual policy '" + name + "' (expected minimal or full)");
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
  if (p.K > 256) fail("K = " + std::to_string(p.K) + " exceeds the maximum head dim 256");
  if (p.V > 256) fail("V = " + std::to_string(p.V) + " exceeds the maximum head dim 256");
  if (!std::isfinite(p.scale) || p.scale == 0)
    fail("scale must be finite and nonzero, got " + std::to_string(p.scale));
  check_impl(p.impl);
  if (p.residual != Residual::minimal && p.residual != Residual::full)
    fail("unknown residual policy id " + std::to_string(int(p.residual)));
}

int64_t residual_elems(const Problem& p) {
  int64_t n = detail::states_elems(p);
  if (p.impl == Impl::chunked && p.residual == Residual::full)
    n += detail::full_a_elems(p) + detail::full_wu_elems(p);
  return n;
}

int64_t forward_workspace_elems(const Problem& p) {
  switch (p.impl) {
    case Impl::recurrent:
      return detail::recurrent_forward_workspace(p);
    case Impl::chunked:
      return detail::chunked_forward_workspace(p);
    case Impl::fused:
      return detail::fused_forward_workspace(p);
    case Impl::ssd:
      return detail::ssd_forward_workspace(p);
  }
  return 0;
}

int64_t backward_workspace_elems(const Problem& p) {
  switch (p.impl) {
    case Impl::recurrent:
      return detail::recurrent_backward_workspace(p);
    case Impl::chunked:
      return detail::chunked_backward_workspace(p);
    case Impl::fused:
      return detail::fused_backward_workspace(p);
    case Impl::ssd:
      return detail::ssd_backward_workspace(p);
  }
  return 0;
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
  validate(p);
  require(in.q, "q", p);
  require(in.k, "k", p);
  require(in.v, "v", p);
  require(in.g, "g", p);
  if (p.impl != Impl::ssd) require(in.beta, "beta", p);
  if (p.has_h0) require(in.h0, "h0 (has_h0 is set)", p);
  require(out.o, "o", p);
  if (p.want_ht) require(out.ht, "ht (want_ht is set)", p);
  require(out.residual, "residual", p);
  if (forward_workspace_elems(p) > 0) require(out.workspace, "forward workspace", p);
  switch (p.impl) {
    case Impl::recurrent:
      return detail::recurrent_forward(p, in, out);
    case Impl::chunked:
      return detail::chunked_forward(p, in, out);
    case Impl::fused:
      return detail::fused_forward(p, in, out);
    case Impl::ssd:
      return detail::ssd_forward(p, in, out);
  }
}

template <typename T>
void backward_cpu(const Problem& p, const Inputs<T>& in, const BackwardArgs<T>& args) {
  validate(p);
  require(in.q, "q", p);
  require(in.k, "k", p);
  require(in.v, "v", p);
  require(in.g, "g", p);
  if (p.impl != Impl::ssd) require(in.beta, "beta", p);
  require(args.d_o, "d_o", p);
  require(args.residual, "residual", p);
  if (backward_workspace_elems(p) > 0) require(args.workspace, "backward workspace", p);
  require(args.dq, "dq", p);
  require(args.dk, "dk", p);
  require(args.dv, "dv", p);
  require(args.dg, "dg", p);
  if (p.impl != Impl::ssd) require(args.dbeta, "dbeta", p);
  if (p.has_h0) require(args.dh0, "dh0 (has_h0 is set)", p);
  switch (p.impl) {
    case Impl::recurrent:
      return detail::recurrent_backward(p, in, args);
    case Impl::chunked:
      return detail::chunked_backward(p, in, args);
    case Impl::fused:
      return detail::fused_backward(p, in, args);
    case Impl::ssd:
      return detail::ssd_backward(p, in, args);
  }
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
