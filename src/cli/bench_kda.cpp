// `gdn bench --op kda` (src/cli/bench_kda.h).
#include "src/cli/bench_kda.h"

#include "src/autograd/node.h"
#include "src/core/allocator.h"
#include "src/ops/kimi_delta_rule.h"
#include "src/ops/ops.h"

namespace gdn::cli {

namespace {

using nlohmann::json;

ops::KdaOptions options_of(const KdaCase& c, kda::Impl impl) {
  ops::KdaOptions opt;
  opt.impl = impl;
  opt.chunk_size = c.chunk;
  opt.cu_seqlens = c.cu_seqlens;
  return opt;
}

// One call's outputs and gradients (q, k, v, g, beta), or only o without fwd_bwd.
std::vector<Tensor> call(const std::vector<Tensor>& in, const ops::KdaOptions& opt, bool fwd_bwd) {
  std::vector<Tensor> x;
  for (size_t i = 0; i < 5; ++i) x.push_back(in[i].detach());
  if (!fwd_bwd) {
    autograd::NoGradGuard ng;
    return {ops::kimi_delta_rule(x[0], x[1], x[2], x[3], x[4], opt).o};
  }
  for (auto& t : x) t.set_requires_grad(true);
  Tensor o = ops::kimi_delta_rule(x[0], x[1], x[2], x[3], x[4], opt).o;
  o.backward(in[5]);
  std::vector<Tensor> out{o.detach()};
  for (auto& t : x) out.push_back(t.grad());
  return out;
}

}  // namespace

KdaInputs kda_inputs(const KdaCase& c, const std::string& reference) {
  Generator gen(3000 + uint64_t(c.T) * 7 + uint64_t(c.D));
  auto round = [&](const Tensor& t) { return ops::cast(ops::cast(t, c.dtype), DType::float64); };
  auto randn = [&](const Shape& s) { return ops::randn(s, DType::float64, Device::cpu(), &gen); };
  const Shape qk{c.B, c.T, c.H, c.D}, b{c.B, c.T, c.H};
  KdaInputs in;
  in.in64 = {round(randn(qk)),
             round(ops::l2_norm(randn(qk))),
             round(randn(qk)),
             round(ops::log(ops::sigmoid(ops::add(randn(qk), 4.0)))),
             round(ops::sigmoid(randn(b))),
             round(randn(qk))};
  if (reference.empty()) return in;
  const bool fwd_bwd = reference == "fwd_bwd";
  const std::vector<Tensor> r = call(in.in64, options_of(c, kda::Impl::recurrent), fwd_bwd);
  in.has_o = true;
  in.o = r[0].to_vector();
  if (fwd_bwd) {
    in.has_grads = true;
    in.dq = r[1].to_vector(), in.dk = r[2].to_vector(), in.dv = r[3].to_vector();
    in.dg = r[4].to_vector(), in.dbeta = r[5].to_vector();
  }
  return in;
}

json kda_row(const KdaCase& c, const kda::Implementation& impl, const std::string& mode) {
  json r = kernel_row(std::string("kda_") + impl.name, mode, c.B, c.H, c.T, c.D,
                      dtype_name(c.dtype), c.chunk, c.cu_seqlens);
  r["op"] = "kda";
  return r;
}

json run_kda_case(const KdaCase& c, const kda::Implementation& impl, const std::string& mode,
                  Device dev, int repeats, double min_sample_ms, const DevicePeak& peak,
                  const KdaInputs& in) {
  const bool fwd_bwd = mode == "fwd_bwd";
  const ops::KdaOptions opt = options_of(c, impl.impl);
  std::vector<Tensor> x;
  for (const Tensor& t : in.in64) x.push_back(ops::to_device(ops::cast(t, c.dtype), dev));
  json r = kda_row(c, impl, mode);
  r["device"] = dev.str();
  reset_peak_memory(dev);
  const MemoryStats before = memory_stats(dev);
  const std::vector<Tensor> out = call(x, opt, fwd_bwd);  // the warm-up, measured
  device_synchronize(dev);
  const double mb = 1.0 / (1024.0 * 1024.0);
  int64_t inputs = 0;
  for (size_t i = 0; i < 5; ++i) inputs += int64_t(x[i].nbytes());
  r["peak_mb"] = double(memory_stats(dev).peak - before.total) * mb;  // beyond what was live
  r["inputs_mb"] = double(inputs) * mb;
  const Timing t = time_it(
      [&] {
        call(x, opt, fwd_bwd);
        device_synchronize(dev);
      },
      repeats, min_sample_ms);
  r["inner"] = t.inner;
  r["median_ms"] = t.median_ms;
  r["q1_ms"] = t.q1_ms;
  r["q3_ms"] = t.q3_ms;
  const kda::Problem p = ops::kda_problem(x[0], x[1], x[2], x[3], x[4], opt, Tensor());
  // What the forward keeps for the backward: the accumulator states at the chunk starts.
  const int64_t acc_bytes = c.dtype == DType::float64 ? 8 : 4;
  r["residual_mb"] = fwd_bwd ? double(kda::residual_elems(p) * acc_bytes) * mb : 0.0;
  const double flops = kda::forward_flops(p) + (fwd_bwd ? kda::backward_flops(p) : 0.0);
  r["gflops"] = flops / (t.median_ms * 1e-3) * 1e-9;
  add_peak_fields(peak, r);
  if (in.has_o) r["rel_err"] = rel_err(out[0].to_vector(), in.o);
  if (fwd_bwd && in.has_grads)
    r["rel_err_grads"] = {{"q", rel_err(out[1].to_vector(), in.dq)},
                          {"k", rel_err(out[2].to_vector(), in.dk)},
                          {"v", rel_err(out[3].to_vector(), in.dv)},
                          {"log_alpha", rel_err(out[4].to_vector(), in.dg)},
                          {"beta", rel_err(out[5].to_vector(), in.dbeta)}};
  return r;
}

}  // namespace gdn::cli
