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
#include <type_traits>

#include "kernels/cpu/attention.h"
#include "src/core/allocator.h"
#include "src/ops/ops.h"
#if defined(GDN_WITH_CUDA)
#include "kernels/cuda/attention_cuda.h"
#include "kernels/cuda/attention_cudnn.h"
#include "src/core/cuda/cuda_context.h"
#endif

namespace gdn::cli {

namespace {

using nlohmann::json;

constexpr const char* kFlashName = "attention_flash";
constexpr const char* kCudnnName = "attention_cudnn";

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

template <typename T>
void call_kernels(const attn::Problem& p, const Buffers& b, bool fwd_bwd) {
  using A = acc_t<T>;
  const DType acc = dtype_of<A>::value;
  {
    Tensor ws = workspace(attn::forward_workspace_elems(p), acc, Device::cpu());
    attn::forward_cpu<T>(p, b.q.data<T>(), b.k.data<T>(), b.v.data<T>(), b.o.data<T>(),
                         b.lse.data<A>(), ws.data<A>());
  }
  if (!fwd_bwd) return;
  Tensor ws = workspace(attn::backward_workspace_elems(p), acc, Device::cpu());
  attn::backward_cpu<T>(p, b.q.data<T>(), b.k.data<T>(), b.v.data<T>(), b.o.data<T>(),
                        b.lse.data<A>(), b.d_o.data<T>(), b.dq.data<T>(), b.dk.data<T>(),
                        b.dv.data<T>(), ws.data<A>());
}

void call(const attn::Problem& p, const Buffers& b, bool fwd_bwd) {
  switch (b.q.dtype()) {
    case DType::float32:
      return call_kernels<float>(p, b, fwd_bwd);
    case DType::float64:
      return call_kernels<double>(p, b, fwd_bwd);
    case DType::bfloat16:
      return call_kernels<bf16>(p, b, fwd_bwd);
    default:
      GDN_FAIL("attention: dtype ", dtype_name(b.q.dtype()),
               " is not supported (float32, bfloat16, float64)");
  }
}

#if defined(GDN_WITH_CUDA)
// What runs one pass on CUDA: cuDNN (with its workspace bytes) or the flash kernel, and why not
// cuDNN where `attention` chose the flash kernel for want of it.
struct PassPlan {
  bool cudnn = false;
  int64_t cudnn_bytes = 0;
  std::string why_not;
};

// The choice of ops::attention (src/ops/attention.cpp) for `pick`, or the kernel asked for.
PassPlan plan_pass(const attn::Problem& p, AttentionKernel kernel, DType dt, void* stream,
                   bool backward) {
  PassPlan plan;
  if (kernel == AttentionKernel::flash) return plan;
  std::string why = std::string("cuDNN's fused attention runs bf16 here, got ") + dtype_name(dt);
  const int64_t bytes =
      dt == DType::bfloat16 ? attn::cudnn_workspace_bytes(p, backward, stream, &why) : -1;
  if (kernel == AttentionKernel::cudnn) {
    GDN_CHECK(bytes >= 0, kCudnnName, ": cuDNN cannot run this case (",
              backward ? "backward" : "forward", "): ", why);
  } else {
    // The op's choice: auto, or GDN_ATTENTION's (read once, layers/config.h).
    const attn::Impl req = nn::backend_overrides().attention.value_or(attn::Impl::automatic);
    try {
      if (!attn::run_on_cudnn(req, bytes >= 0 ? std::string() : why)) {
        plan.why_not = req == attn::Impl::flash ? "GDN_ATTENTION=flash" : why;
        return plan;
      }
    } catch (const std::invalid_argument& e) {
      GDN_FAIL("attention (GDN_ATTENTION): ", e.what());
    }
  }
  plan.cudnn = true;
  plan.cudnn_bytes = bytes;
  return plan;
}

template <typename T>
void call_cuda_kernels(const attn::Problem& p, const Buffers& b, bool fwd_bwd, const PassPlan& fwd,
                       const PassPlan& bwd, Device dev, void* stream) {
  using A = acc_t<T>;
  const DType acc = dtype_of<A>::value;
  const T *q = b.q.data<T>(), *k = b.k.data<T>(), *v = b.v.data<T>();
  {
    if (fwd.cudnn) {
      if constexpr (std::is_same_v<T, bf16>) {
        Tensor ws = workspace((fwd.cudnn_bytes + 3) / 4, DType::float32, dev);
        attn::forward_cudnn(p, q, k, v, b.o.data<T>(), b.lse.data<float>(), ws.data_ptr(), stream);
      } else {
        GDN_FAIL("attention: cuDNN runs bf16, got ", dtype_name(b.q.dtype()));
      }
    } else {
      Tensor ws = workspace(attn::cuda_forward_workspace_elems(p), acc, dev);
      attn::forward_cuda<T>(p, q, k, v, b.o.data<T>(), b.lse.data<A>(), ws.data<A>(), stream);
    }
  }
  if (!fwd_bwd) return;
  if (bwd.cudnn) {
    if constexpr (std::is_same_v<T, bf16>) {
      Tensor ws = workspace((bwd.cudnn_bytes + 3) / 4, DType::float32, dev);
      attn::backward_cudnn(p, q, k, v, b.o.data<T>(), b.lse.data<float>(), b.d_o.data<T>(),
                           b.dq.data<T>(), b.dk.data<T>(), b.dv.data<T>(), ws.data_ptr(), stream);
    } else {
      GDN_FAIL("attention: cuDNN runs bf16, got ", dtype_name(b.q.dtype()));
    }
  } else {
    Tensor ws = workspace(attn::cuda_backward_workspace_elems(p), acc, dev);
    attn::backward_cuda<T>(p, q, k, v, b.o.data<T>(), b.lse.data<A>(), b.d_o.data<T>(),
                           b.dq.data<T>(), b.dk.data<T>(), b.dv.data<T>(), ws.data<A>(), stream);
  }
}

void call_cuda(const attn::Problem& p, const Buffers& b, bool fwd_bwd, const PassPlan& fwd,
               const PassPlan& bwd, Device dev, void* stream) {
  switch (b.q.dtype()) {
    case DType::float32:
      return call_cuda_kernels<float>(p, b, fwd_bwd, fwd, bwd, dev, stream);
    case DType::float64:
      return call_cuda_kernels<double>(p, b, fwd_bwd, fwd, bwd, dev, stream);
    case DType::bfloat16:
      return call_cuda_kernels<bf16>(p, b, fwd_bwd, fwd, bwd, dev, stream);
    default:
      GDN_FAIL("attention: dtype ", dtype_name(b.q.dtype()),
               " is not supported (float32, bfloat16, float64)");
  }
}
#endif

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

bool is_attention_impl(const std::string& name) {
  return name == "attention" || name == kFlashName || name == kCudnnName;
}

AttentionKernel parse_attention_impl(const std::string& name, Device dev) {
  GDN_CHECK(is_attention_impl(name), "--impls ", name,
            ": not an attention row (attention, attention_flash, attention_cudnn)");
  if (name == "attention") return AttentionKernel::pick;
  GDN_CHECK(dev.is_cuda(), "--impls ", name, " runs a CUDA kernel and needs --device cuda (got ",
            "--device ", dev.str(), "; there `attention` runs the device's kernel)");
  return name == kFlashName ? AttentionKernel::flash : AttentionKernel::cudnn;
}

const char* attention_impl_name(AttentionKernel k) {
  return k == AttentionKernel::flash   ? kFlashName
         : k == AttentionKernel::cudnn ? kCudnnName
                                       : "attention";
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
  call(p, ref, grads);
  in.has_o = true;
  in.o = ref.o.to_vector();
  if (grads) {
    in.has_grads = true;
    in.dq = ref.dq.to_vector(), in.dk = ref.dk.to_vector(), in.dv = ref.dv.to_vector();
  }
  return in;
}

double attention_pairs(const AttentionCase& c) {
  double pairs = 0;
  for (int64_t len : sequence_lengths(c)) {
    const double L = double(len);
    if (c.window <= 0 || c.window >= len) {
      pairs += L * (L + 1) / 2;
    } else {
      // queries t < w see t + 1 keys, the others w
      const double w = double(c.window);
      pairs += w * (w + 1) / 2 + (L - w) * w;
    }
  }
  return pairs;
}

double attention_flops(const AttentionCase& c, bool fwd_bwd) {
  const double per_pair = 2.0 * double(c.D) * (fwd_bwd ? 7.0 : 2.0);  // 2 + 5 products
  return double(c.H) * attention_pairs(c) * per_pair;
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

json run_attention_case(const AttentionCase& c, AttentionKernel kernel, const std::string& mode,
                        Device dev, int repeats, double min_sample_ms, const DevicePeak& peak,
                        const AttentionInputs& in) {
  GDN_CHECK(dev.is_cpu() || dev.is_cuda(), "attention: the bench runs on cpu or cuda, not ",
            dev.str());
  const std::string impl = attention_impl_name(kernel);
  GDN_CHECK(kernel == AttentionKernel::pick || dev.is_cuda(), impl,
            ": a CUDA kernel (--device cuda), not on ", dev.str());
  const bool fwd_bwd = mode == "fwd_bwd";
  const attn::Problem p = problem_of(c);
  attn::validate(p);
  json r = attention_row(c, impl, mode);
#if defined(GDN_WITH_CUDA)
  PassPlan fwd, bwd;
  void* stream = nullptr;
  if (dev.is_cuda()) {
    cuda::set_device(dev.index);
    stream = cuda::current_stream(dev.index);
    fwd = plan_pass(p, kernel, c.dtype, stream, false);
    if (fwd_bwd) bwd = plan_pass(p, kernel, c.dtype, stream, true);
    r["attention_kernel"] = fwd.cudnn ? "cudnn" : "flash";
    if (fwd_bwd && bwd.cudnn != fwd.cudnn)
      r["attention_kernel_bwd"] = bwd.cudnn ? "cudnn" : "flash";
    // Where `attention` ran the flash kernel for want of cuDNN: why (as a fused GDR row's).
    if (!fwd.cudnn && !fwd.why_not.empty()) r["fallback_fwd"] = "flash: " + fwd.why_not;
    if (fwd_bwd && !bwd.cudnn && !bwd.why_not.empty()) r["fallback_bwd"] = "flash: " + bwd.why_not;
  }
#endif
  const Buffers b = make_buffers(in.in64, c.dtype, dev);
  const int64_t inputs_bytes = int64_t(b.q.nbytes() + b.k.nbytes() + b.v.nbytes());
  const std::function<void()> once = [&] {
#if defined(GDN_WITH_CUDA)
    if (dev.is_cuda()) {
      call_cuda(p, b, fwd_bwd, fwd, bwd, dev, stream);
      device_synchronize(dev);  // the kernels are asynchronous: a call ends when they do
      return;
    }
#endif
    call(p, b, fwd_bwd);
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
  r["residual_mb"] = fwd_bwd ? double(b.lse.nbytes()) * mb : 0.0;  // lse, beside the inputs and o
  r["peak_mb"] = double(s.peak) * mb;
  r["inputs_mb"] = double(inputs_bytes) * mb;
  r["gflops"] = attention_flops(c, fwd_bwd) / (t.median_ms * 1e-3) * 1e-9;
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
    if (is_attention_impl(name) && window > 0) name += "@" + std::to_string(window);
    times[s][r["seq"]][name] = r["median_ms"];
  }
  // attention rows' names, with their window: attention, attention_cudnn@1024, ...
  const auto is_attention = [](const std::string& n) {
    return is_attention_impl(n.substr(0, n.find('@')));
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
