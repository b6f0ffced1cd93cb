// `gdn bench --impls attention` (src/cli/bench_attention.h).
#include "src/cli/bench_attention.h"
#include "layers/config.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <stdexcept>
#include <tuple>

#include "kernels/attention_registry.h"
#include "src/core/allocator.h"
#include "src/ops/attention.h"
#include "src/ops/ops.h"
#if defined(GDN_WITH_CUDA)
#include "src/core/cuda/cuda_context.h"
#endif

namespace gdn::cli {

namespace {

using nlohmann::json;

attn::Problem problem_of(const AttentionCase& c) {
  attn::Problem p;
  p.B = c.B, p.T = c.T, p.H = c.H, p.HKV = c.H, p.D = c.D;
  p.window = c.window;
  p.scale = 1.0 / std::sqrt(double(c.D));
  p.cu_seqlens = c.cu_seqlens;
  return p;
}

// The lengths of the case's sequences (B rows of T, or its packing).
std::vector<int64_t> sequence_lengths(const AttentionCase& c) {
  if (c.cu_seqlens.empty()) return std::vector<int64_t>(size_t(c.B), c.T);
  std::vector<int64_t> lens;
  for (size_t i = 1; i < c.cu_seqlens.size(); ++i)
    lens.push_back(c.cu_seqlens[i] - c.cu_seqlens[i - 1]);
  return lens;
}

// One forward (and backward) call's buffers, as tensors so that the allocator sees them: the
// inputs, o and lse (the residual), the gradients, and the workspace (tagged workspace).
struct Buffers {
  Tensor q, k, v, d_o, o, lse, dq, dk, dv;
};

// A kernel's scratch of `elems` elements of `dt` on `dev`, tagged workspace (at least one).
Tensor workspace(int64_t elems, DType dt, Device dev) {
  MemoryCategoryScope cat(MemCategory::workspace);
  return ops::empty({std::max<int64_t>(elems, 1)}, dt, dev);
}

// What runs one pass: an entry's kernels on the device and the workspace bytes they take, and on
// CUDA, where `attention` chose the flash kernel for want of cuDNN, why.
struct PassPlan {
  const attn::Implementation* runs = nullptr;
  const attn::DeviceKernels* kernels = nullptr;
  int64_t workspace_bytes = 0;
  std::string why_not;
  bool cudnn() const { return runs && runs->impl == attn::Impl::cudnn; }
};

// The entry's kernels for one pass on `dev` (kernels/attention_registry.h); on CUDA for
// `attention` the choice of ops::attention (src/ops/attention.cpp), or the kernel asked for.
PassPlan plan_pass(const attn::Problem& p, const attn::Implementation& entry, DType dt, Device dev,
                   void* stream, bool backward) {
  const attn::SdpaType t = ops::attention_type(dt);
  if (!dev.is_cuda())
    return {&entry, entry.cpu, entry.cpu->workspace_bytes(p, t, backward, nullptr, nullptr), ""};
  if (entry.impl == attn::Impl::cudnn) {
    std::string why;
    const int64_t bytes = entry.cuda->workspace_bytes(p, t, backward, stream, &why);
    GDN_CHECK(bytes >= 0, entry.name, ": cuDNN cannot run this case (",
              backward ? "backward" : "forward", "): ", why);
    return {&entry, entry.cuda, bytes, ""};
  }
  // `attention`: the op's choice, auto or GDN_ATTENTION's (read once, layers/config.h).
  const attn::Impl req = entry.impl == attn::Impl::flash
                             ? attn::Impl::flash
                             : nn::backend_overrides().attention.value_or(attn::Impl::automatic);
  attn::CudaPass pass;
  try {
    pass = attn::cuda_pass(p, req, t, backward, stream);
  } catch (const std::invalid_argument& e) {
    GDN_FAIL("attention (GDN_ATTENTION): ", e.what());
  }
  PassPlan plan{pass.runs, pass.runs->cuda, pass.workspace_bytes, ""};
  if (entry.impl == attn::Impl::automatic && !plan.cudnn())
    plan.why_not = req == attn::Impl::flash ? "GDN_ATTENTION=flash" : pass.why_not;
  return plan;
}

// One pass of `plan` on the buffers, with its workspace from the allocator (tagged workspace).
template <typename T>
void run_pass(const attn::Problem& p, const PassPlan& plan, bool backward, const Buffers& b,
              Device dev, void* stream) {
  using A = acc_t<T>;
  const auto& kernels = plan.kernels->of<T>();
  const attn::Pass<T> kernel = backward ? kernels.backward : kernels.forward;
  GDN_CHECK(kernel, plan.runs->name, ": no kernel for ", dtype_name(b.q.dtype()));
  const int64_t unit = int64_t(sizeof(A));
  Tensor ws = workspace((plan.workspace_bytes + unit - 1) / unit, dtype_of<A>::value, dev);
  attn::Args<T> a;
  a.q = b.q.data<T>(), a.k = b.k.data<T>(), a.v = b.v.data<T>();
  a.o = b.o.data<T>();
  a.lse = b.lse.data<A>();
  a.d_o = b.d_o.data<T>();
  a.dq = b.dq.data<T>(), a.dk = b.dk.data<T>(), a.dv = b.dv.data<T>();
  a.workspace = ws.data_ptr();
  kernel(p, a, stream);
}

// The forward (and backward) of the planned passes.
void call(const attn::Problem& p, const Buffers& b, bool fwd_bwd, const PassPlan& fwd,
          const PassPlan& bwd, Device dev, void* stream) {
  const auto both = [&](auto tag) {
    using T = decltype(tag);
    run_pass<T>(p, fwd, false, b, dev, stream);
    if (fwd_bwd) run_pass<T>(p, bwd, true, b, dev, stream);
  };
  switch (b.q.dtype()) {
    case DType::float32:
      return both(float{});
    case DType::float64:
      return both(double{});
    case DType::bfloat16:
      return both(bf16{});
    default:
      GDN_FAIL("attention: dtype ", dtype_name(b.q.dtype()),
               " is not supported (float32, bfloat16, float64)");
  }
}

// The buffers of a call of dtype dt on `dev`, the inputs from the fp64 ones (rounded to dt).
Buffers make_buffers(const std::vector<Tensor>& in64, DType dt, Device dev) {
  const DType acc = dt == DType::float64 ? DType::float64 : DType::float32;
  const Shape shape = in64[0].shape();
  auto input = [&](const Tensor& x) { return ops::to_device(ops::cast(x, dt), dev); };
  Buffers b;
  b.q = input(in64[0]), b.k = input(in64[1]), b.v = input(in64[2]), b.d_o = input(in64[3]);
  b.o = ops::empty(shape, dt, dev);
  b.lse = ops::empty({shape[0], shape[2], shape[1]}, acc, dev);
  b.dq = ops::empty(shape, dt, dev), b.dk = ops::empty(shape, dt, dev);
  b.dv = ops::empty(shape, dt, dev);
  return b;
}

}  // namespace

const attn::Implementation& attention_entry(const std::string& name, Device dev) {
  const attn::Implementation& entry = attn::find_implementation(name);
  GDN_CHECK(entry.on_cpu || dev.is_cuda(), "--impls ", name,
            " runs a CUDA kernel and needs --device cuda (got ", "--device ", dev.str(),
            "; there `attention` runs the device's kernel)");
  return entry;
}

AttentionInputs attention_inputs(const AttentionCase& c, const std::string& reference) {
  AttentionInputs in;
  Generator gen(2000 + uint64_t(c.T) * 7 + uint64_t(c.D));
  for (int i = 0; i < 4; ++i) {
    Tensor x = ops::randn({c.B, c.T, c.H, c.D}, DType::float64, Device::cpu(), &gen);
    in.in64.push_back(ops::cast(ops::cast(x, c.dtype), DType::float64));
  }
  if (reference.empty()) return in;
  // The fp64 kernel on the same (rounded) inputs: tests/test_attention_cpu.cpp checks it against
  // a naive softmax(Q K^T) V.
  const bool grads = reference == "fwd_bwd";
  const attn::Problem p = problem_of(c);
  attn::validate(p);
  const Buffers ref = make_buffers(in.in64, DType::float64, Device::cpu());
  const attn::Implementation& cpu = attn::implementation_of(attn::Impl::automatic);
  const PassPlan fwd = plan_pass(p, cpu, DType::float64, Device::cpu(), nullptr, false);
  const PassPlan bwd = plan_pass(p, cpu, DType::float64, Device::cpu(), nullptr, true);
  call(p, ref, grads, fwd, bwd, Device::cpu(), nullptr);
  in.has_o = true;
  in.o = ref.o.to_vector();
  if (grads) {
    in.has_grads = true;
    in.dq = ref.dq.to_vector(), in.dk = ref.dk.to_vector(), in.dv = ref.dv.to_vector();
  }
  return in;
}

json attention_row(const AttentionCase& c, const std::string& impl, const std::string& mode) {
  json r = {{"impl", impl},    {"mode", mode},      {"batch", c.B}, {"heads", c.H},
            {"seq", c.T},      {"dk", c.D},         {"dv", c.D},    {"dtype", dtype_name(c.dtype)},
            {"chunk_size", 0}, {"window", c.window}};
  if (!c.cu_seqlens.empty()) {
    r["docs"] = int64_t(c.cu_seqlens.size()) - 1;
    r["doc_lens"] = sequence_lengths(c);
  }
  return r;
}

json run_attention_case(const AttentionCase& c, const attn::Implementation& kernel,
                        const std::string& mode, Device dev, int repeats, double min_sample_ms,
                        const DevicePeak& peak, const AttentionInputs& in) {
  GDN_CHECK(dev.is_cpu() || dev.is_cuda(), "attention: the bench runs on cpu or cuda, not ",
            dev.str());
  const std::string impl = kernel.name;
  GDN_CHECK(kernel.on_cpu || dev.is_cuda(), impl, ": a CUDA kernel (--device cuda), not on ",
            dev.str());
  const bool fwd_bwd = mode == "fwd_bwd";
  const attn::Problem p = problem_of(c);
  attn::validate(p);
  json r = attention_row(c, impl, mode);
  void* stream = nullptr;
#if defined(GDN_WITH_CUDA)
  if (dev.is_cuda()) {
    cuda::set_device(dev.index);
    stream = cuda::current_stream(dev.index);
  }
#endif
  const PassPlan fwd = plan_pass(p, kernel, c.dtype, dev, stream, false);
  const PassPlan bwd = fwd_bwd ? plan_pass(p, kernel, c.dtype, dev, stream, true) : PassPlan{};
  if (dev.is_cuda()) {
    r["attention_kernel"] = fwd.cudnn() ? "cudnn" : "flash";
    if (fwd_bwd && bwd.cudnn() != fwd.cudnn())
      r["attention_kernel_bwd"] = bwd.cudnn() ? "cudnn" : "flash";
    // Where `attention` ran the flash kernel for want of cuDNN: why (as a fused GDR row's).
    if (!fwd.cudnn() && !fwd.why_not.empty()) r["fallback_fwd"] = "flash: " + fwd.why_not;
    if (fwd_bwd && !bwd.cudnn() && !bwd.why_not.empty())
      r["fallback_bwd"] = "flash: " + bwd.why_not;
  }
  const Buffers b = make_buffers(in.in64, c.dtype, dev);
  const int64_t inputs_bytes = int64_t(b.q.nbytes() + b.k.nbytes() + b.v.nbytes());
  const std::function<void()> once = [&] {
    call(p, b, fwd_bwd, fwd, bwd, dev, stream);
    // CUDA kernels are asynchronous: a call ends when they do.
    if (dev.is_cuda()) device_synchronize(dev);
  };

  // The warm-up call: memory and the outputs.
  device_synchronize(dev);
  reset_peak_memory(dev);
  const MemoryStats before = memory_stats(dev);
  once();
  const MemoryStats s = memory_stats(dev);
  const Timing t = time_it(once, repeats, min_sample_ms);

  r["device"] = dev.str();
  r["inner"] = t.inner;
  r["median_ms"] = t.median_ms;
  r["q1_ms"] = t.q1_ms;
  r["q3_ms"] = t.q3_ms;
  const double mb = 1.0 / (1024.0 * 1024.0);
  r["temp_mb"] =
      double(s.max[int(MemCategory::workspace)] - before.cur(MemCategory::workspace)) * mb;
  // lse, beside the inputs and o
  r["residual_mb"] =
      fwd_bwd ? double(kernel.residual_elems(p) * int64_t(dtype_size(b.lse.dtype()))) * mb : 0.0;
  r["peak_mb"] = double(s.peak) * mb;
  r["inputs_mb"] = double(inputs_bytes) * mb;
  r["gflops"] = kernel.flops(p, fwd_bwd) / (t.median_ms * 1e-3) * 1e-9;
  add_peak_fields(peak, r);
  // Against the fp64 CPU kernel (the outputs copied to the host).
  if (in.has_o) r["rel_err"] = rel_err(b.o.to_vector(), in.o);
  if (fwd_bwd && in.has_grads)
    r["rel_err_grads"] = {{"q", rel_err(b.dq.to_vector(), in.dq)},
                          {"k", rel_err(b.dk.to_vector(), in.dk)},
                          {"v", rel_err(b.dv.to_vector(), in.dv)}};
  return r;
}

std::vector<std::string> attention_crossovers(const json& results) {
  // (mode, dtype, D, batch, heads, docs) -> T -> row name -> median ms; attention rows (each
  // kernel's name) with a window are named as attention_flash@w.
  using Shape = std::tuple<std::string, std::string, int64_t, int64_t, int64_t, int64_t>;
  std::map<Shape, std::map<int64_t, std::map<std::string, double>>> times;
  for (const json& r : results) {
    if (r.contains("error")) continue;
    const Shape s{r["mode"], r["dtype"], r["dk"], r["batch"], r["heads"], r.value("docs", 0)};
    std::string name = r["impl"];
    const int64_t window = r.value("window", int64_t(0));
    if (attn::is_implementation(name) && window > 0) name += "@" + std::to_string(window);
    times[s][r["seq"]][name] = r["median_ms"];
  }
  // attention rows' names, with their window: attention, attention_cudnn@1024, ...
  const auto is_attention = [](const std::string& n) {
    return attn::is_implementation(n.substr(0, n.find('@')));
  };
  std::vector<std::string> lines;
  for (const auto& [shape, by_t] : times) {
    // Per (attention row, gated-delta-rule row): the T since which attention costs more (0: it
    // does not at the largest T), and the ratio there or at the largest T.
    struct Verdict {
      int64_t more_from = 0, last_t = 0;
      double ratio = 0;
    };
    std::map<std::pair<std::string, std::string>, Verdict> verdicts;
    for (const auto& [T, rows] : by_t)  // ascending T
      for (const auto& [a_name, a_ms] : rows) {
        if (!is_attention(a_name)) continue;
        for (const auto& [g_name, g_ms] : rows) {
          if (is_attention(g_name)) continue;
          Verdict& v = verdicts[{a_name, g_name}];
          const bool more = a_ms > g_ms;
          if (more && v.more_from == 0) v.more_from = T, v.ratio = a_ms / g_ms;
          if (!more) v.more_from = 0, v.ratio = a_ms / g_ms;
          v.last_t = T;
        }
      }
    const auto& [mode, dtype, D, B, H, docs] = shape;
    std::string where = " " + mode + " " + dtype + " B=" + std::to_string(B) +
                        " H=" + std::to_string(H) + " D=" + std::to_string(D);
    if (docs > 0) where += " docs=" + std::to_string(docs);
    for (const auto& [names, v] : verdicts) {
      char text[160];
      if (v.more_from > 0) {
        std::snprintf(text, sizeof text, ": costs more than %s from T = %lld (%.2fx there)",
                      names.second.c_str(), (long long)v.more_from, v.ratio);
      } else {
        std::snprintf(text, sizeof text, ": costs less than %s up to T = %lld (%.2fx there)",
                      names.second.c_str(), (long long)v.last_t, v.ratio);
      }
      lines.push_back(names.first + where + text);
    }
  }
  return lines;
}

}  // namespace gdn::cli
