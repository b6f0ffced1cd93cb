// `gdn bench --impls attention` (src/cli/bench_attention.h).
#include "src/cli/bench_attention.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <tuple>

#include "kernels/cpu/attention.h"
#include "src/core/allocator.h"
#include "src/ops/ops.h"

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

template <typename T>
void call_kernels(const attn::Problem& p, const Buffers& b, bool fwd_bwd) {
  using A = acc_t<T>;
  const DType acc = dtype_of<A>::value;
  {
    Tensor ws;
    {
      MemoryCategoryScope cat(MemCategory::workspace);
      ws = ops::empty({std::max<int64_t>(attn::forward_workspace_elems(p), 1)}, acc);
    }
    attn::forward_cpu<T>(p, b.q.data<T>(), b.k.data<T>(), b.v.data<T>(), b.o.data<T>(),
                         b.lse.data<A>(), ws.data<A>());
  }
  if (!fwd_bwd) return;
  Tensor ws;
  {
    MemoryCategoryScope cat(MemCategory::workspace);
    ws = ops::empty({std::max<int64_t>(attn::backward_workspace_elems(p), 1)}, acc);
  }
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

// Inputs q, k, v, d_o ~ N(0, 1) in fp64 (rounded to the case dtype) and the buffers of a call
// of dtype dt.
Buffers make_buffers(const std::vector<Tensor>& in64, DType dt) {
  const DType acc = dt == DType::float64 ? DType::float64 : DType::float32;
  const Shape shape = in64[0].shape();
  Buffers b;
  b.q = ops::cast(in64[0], dt), b.k = ops::cast(in64[1], dt), b.v = ops::cast(in64[2], dt);
  b.d_o = ops::cast(in64[3], dt);
  b.o = ops::empty(shape, dt);
  b.lse = ops::empty({shape[0], shape[2], shape[1]}, acc);
  b.dq = ops::empty(shape, dt), b.dk = ops::empty(shape, dt), b.dv = ops::empty(shape, dt);
  return b;
}

}  // namespace

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

json run_attention_case(const AttentionCase& c, const std::string& mode, Device dev, int repeats,
                        double min_sample_ms, const DevicePeak& peak, bool with_reference) {
  GDN_CHECK(dev.is_cpu(), "attention: the bench runs the CPU kernel only (--device ", dev.str(),
            ")");
  const bool fwd_bwd = mode == "fwd_bwd";
  const attn::Problem p = problem_of(c);
  attn::validate(p);
  Generator gen(2000 + uint64_t(c.T) * 7 + uint64_t(c.D));
  std::vector<Tensor> in64;
  for (int i = 0; i < 4; ++i) {
    Tensor x = ops::randn({c.B, c.T, c.H, c.D}, DType::float64, Device::cpu(), &gen);
    in64.push_back(ops::cast(ops::cast(x, c.dtype), DType::float64));
  }
  const Buffers b = make_buffers(in64, c.dtype);
  const int64_t inputs_bytes = int64_t(b.q.nbytes() + b.k.nbytes() + b.v.nbytes());

  // The warm-up call: memory and the outputs.
  reset_peak_memory(dev);
  const MemoryStats before = memory_stats(dev);
  call(p, b, fwd_bwd);
  const MemoryStats s = memory_stats(dev);
  const Timing t = time_it([&] { call(p, b, fwd_bwd); }, repeats, min_sample_ms);

  json r = {
      {"impl", "attention"}, {"mode", mode},      {"batch", c.B}, {"heads", c.H},
      {"seq", c.T},          {"dk", c.D},         {"dv", c.D},    {"dtype", dtype_name(c.dtype)},
      {"chunk_size", 0},     {"window", c.window}};
  if (!c.cu_seqlens.empty()) {
    r["docs"] = int64_t(c.cu_seqlens.size()) - 1;
    r["doc_lens"] = sequence_lengths(c);
  }
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
  if (with_reference) {
    // The fp64 kernel on the same (rounded) inputs: tests/test_attention_cpu.cpp checks it
    // against a naive softmax(Q K^T) V.
    const Buffers ref = make_buffers(in64, DType::float64);
    call(p, ref, fwd_bwd);
    r["rel_err"] = rel_err(b.o.to_vector(), ref.o.to_vector());
    if (fwd_bwd)
      r["rel_err_grads"] = {{"q", rel_err(b.dq.to_vector(), ref.dq.to_vector())},
                            {"k", rel_err(b.dk.to_vector(), ref.dk.to_vector())},
                            {"v", rel_err(b.dv.to_vector(), ref.dv.to_vector())}};
  }
  return r;
}

std::vector<std::string> attention_crossovers(const json& results) {
  // (mode, dtype, D, batch, heads, docs) -> T -> row name -> median ms; attention rows with a
  // window are named attention@w.
  using Shape = std::tuple<std::string, std::string, int64_t, int64_t, int64_t, int64_t>;
  std::map<Shape, std::map<int64_t, std::map<std::string, double>>> times;
  for (const json& r : results) {
    if (r.contains("error")) continue;
    const Shape s{r["mode"], r["dtype"], r["dk"], r["batch"], r["heads"], r.value("docs", 0)};
    std::string name = r["impl"];
    const int64_t window = r.value("window", int64_t(0));
    if (name == "attention" && window > 0) name += "@" + std::to_string(window);
    times[s][r["seq"]][name] = r["median_ms"];
  }
  const auto is_attention = [](const std::string& n) { return n.rfind("attention", 0) == 0; };
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
