// `gdn bench`: times the gated-delta-rule implementations over a sweep of shapes and dtypes
// and writes the seed's JSON schema (docs/benchmarks/reference/seed-bench-rtx3090-jax.json): per
// result median/q1/q3 ms, temp/residual/peak/inputs MB from the allocator, rel_err of o and of
// every gradient against the fp64 recurrent reference, GFLOP/s by docs/design.md's count and the
// fraction of the device's measured peak. Packed sequences (--docs, --doc-lens) add rows that
// carry their packing ("docs", "doc_lens") and their time against the unpacked row of the same
// implementation, mode and shape ("vs_unpacked"), which the same run measures. `attention` rows
// (src/cli/bench_attention.h; --window) time causal softmax attention at the same shapes (on CUDA
// also `attention_flash`, our kernel, and `attention_cudnn`, cuDNN's), and the run ends with
// where in T each costs more than each gated-delta-rule implementation. The JSON is rewritten
// (atomically) after every row, so a sweep stopped part-way keeps what it measured. On a machine
// without the CUDA device asked for, every row is an error row that says so ("no device: ...").
// Exit status 2 when any result failed (the JSON, with its error rows, is still written), 1 on an
// error.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>

#include "src/autograd/node.h"
#include "src/cli/bench_attention.h"
#include "src/cli/bench_kda.h"
#include "src/cli/bench_util.h"
#include "src/cli/commands.h"
#include "src/cli/flag_checks.h"
#include "src/io/atomic_file.h"
#include "src/ops/gated_delta_rule.h"
#include "src/ops/ops.h"
#if defined(GDN_WITH_CUDA)
#include "kernels/cuda/gdr_cuda.h"
#endif

namespace gdn::cli {

namespace {

using nlohmann::json;

// The exit status of a sweep in which some result failed (1 is an error before any result).
constexpr int kRowsFailed = 2;

struct BenchArgs {
  std::vector<std::string> ops{"gdr"};  // --op: gdr (and attention), kda, or both
  std::vector<std::string> impls{"recurrent", "chunked", "fused", "ssd"};
  std::vector<std::string> modes{"fwd", "fwd_bwd"};
  std::vector<std::string> dtypes{"float32"};
  std::vector<int64_t> seqs{2048}, dims{64};
  std::vector<int> chunks{64};
  int64_t batch = 1, heads = 4;
  int repeats = 5;
  double min_sample_ms = 20;
  std::string device = "cpu", out, preset;
  bool no_reference = false;
  std::vector<int64_t> docs;        // --docs: N equal sequences per row, for each N
  std::vector<int64_t> doc_lens;    // --doc-lens: explicit sequence lengths (their sum is T)
  std::vector<int64_t> windows{0};  // --window: attention rows' windows (0: full causal)
  double peak_gflops = 0;           // --peak-gflops: the peak "% of peak" divides by
};

struct Case {
  int64_t B, H, T, D;
  DType dtype;
  int chunk;
  std::vector<int64_t> cu_seqlens;  // packed sequences (B = 1); empty: unpacked
};

// The packings of a row of T tokens that the arguments ask for, each as sequence lengths: none
// (unpacked) first, then --docs N (N equal sequences), then --doc-lens. Errors name the flag.
std::vector<std::vector<int64_t>> packings(const BenchArgs& a, int64_t T) {
  std::vector<std::vector<int64_t>> out{{}};
  for (int64_t n : a.docs) {
    GDN_CHECK(n >= 1, "--docs ", n, ": the number of sequences must be >= 1");
    GDN_CHECK(T % n == 0, "--docs ", n, ": T = ", T, " is not divisible into ", n,
              " equal sequences (choose a --seq divisible by ", n, ", or --doc-lens)");
    out.push_back(std::vector<int64_t>(size_t(n), T / n));
  }
  if (!a.doc_lens.empty()) {
    int64_t sum = 0;
    for (int64_t l : a.doc_lens) {
      GDN_CHECK(l >= 1, "--doc-lens: every length must be >= 1, got ", l);
      sum += l;
    }
    GDN_CHECK(sum == T, "--doc-lens: the lengths sum to ", sum, ", not T = ", T,
              " (--seq); their sum must be T");
    out.push_back(a.doc_lens);
  }
  if (out.size() > 1)
    GDN_CHECK(a.batch == 1,
              "--docs / --doc-lens pack sequences into one row: --batch must be 1, got ", a.batch);
  return out;
}

std::vector<int64_t> offsets_of(const std::vector<int64_t>& lens) {
  if (lens.empty()) return {};
  std::vector<int64_t> cu{0};
  for (int64_t l : lens) cu.push_back(cu.back() + l);
  return cu;
}

// Inputs as the layer produces them: k L2-normalised, beta in (0, 1), g <= 0 (log decay).
struct CaseInputs {
  Tensor q, k, v, g, beta, d_o;  // fp64 on the CPU, already rounded to the case dtype
};

CaseInputs make_inputs(const Case& c) {
  Generator gen(1000 + uint64_t(c.T) * 7 + uint64_t(c.D));
  auto round = [&](const Tensor& t) { return ops::cast(ops::cast(t, c.dtype), DType::float64); };
  const Shape qk{c.B, c.T, c.H, c.D}, gb{c.B, c.T, c.H};
  CaseInputs in;
  in.q = round(ops::randn(qk, DType::float64, Device::cpu(), &gen));
  in.k = round(ops::l2_norm(ops::randn(qk, DType::float64, Device::cpu(), &gen)));
  in.v = round(ops::randn(qk, DType::float64, Device::cpu(), &gen));
  in.g = round(ops::mul(
      ops::log(ops::sigmoid(ops::add(ops::randn(gb, DType::float64, Device::cpu(), &gen), 4.0))),
      1.0));
  in.beta = round(ops::sigmoid(ops::randn(gb, DType::float64, Device::cpu(), &gen)));
  in.d_o = round(ops::randn(qk, DType::float64, Device::cpu(), &gen));
  return in;
}

struct Reference {
  std::vector<double> o, dq, dk, dv, dg, dbeta;
};

Reference reference(const CaseInputs& in, bool ssd, const Case& c) {
  std::vector<Tensor> x{in.q.detach(), in.k.detach(), in.v.detach(), in.g.detach(),
                        in.beta.detach()};
  for (auto& t : x) t.set_requires_grad(true);
  ops::GdrOptions opt;
  opt.impl = ssd ? gdr::Impl::ssd : gdr::Impl::recurrent;
  opt.chunk_size = c.chunk;
  opt.cu_seqlens = c.cu_seqlens;
  auto r = ops::gated_delta_rule(x[0], x[1], x[2], x[3], ssd ? Tensor() : x[4], opt);
  r.o.backward(in.d_o);
  Reference ref;
  ref.o = r.o.to_vector();
  ref.dq = x[0].grad().to_vector();
  ref.dk = x[1].grad().to_vector();
  ref.dv = x[2].grad().to_vector();
  ref.dg = x[3].grad().to_vector();
  if (!ssd) ref.dbeta = x[4].grad().to_vector();
  return ref;
}

// The fields that name a result row (also of a row that failed); packed rows add their number of
// sequences and their lengths.
json row_of(const std::string& impl, const std::string& mode, const Case& c) {
  return kernel_row(impl, mode, c.B, c.H, c.T, c.D, dtype_name(c.dtype), c.chunk, c.cu_seqlens);
}

// A row's timed call (it holds its own inputs) and its calls per timed sample.
struct TimedCall {
  std::function<void()> call;
  int inner = 1;
  int64_t held_bytes = 0;  // the device inputs it keeps alive
};

// Packed time over unpacked time with the two calls alternating: `repeats` pairs of samples (each
// side its own calls per sample), the median of the pairs' ratios. Rows run minutes apart on a
// shared machine whose load drifts; the two samples of a pair run back to back.
double interleaved_ratio(const TimedCall& packed, const TimedCall& unpacked, int repeats) {
  std::vector<double> ratios;
  for (int r = 0; r < std::max(repeats, 1); ++r) {
    const double u = time_it(unpacked.call, 1, 0, unpacked.inner).median_ms;
    const double p = time_it(packed.call, 1, 0, packed.inner).median_ms;
    ratios.push_back(p / u);
  }
  std::sort(ratios.begin(), ratios.end());
  const size_t n = ratios.size();
  return n % 2 ? ratios[n / 2] : 0.5 * (ratios[n / 2 - 1] + ratios[n / 2]);
}

// One row's call: the case's inputs on the device in its dtype and the kernel's options. run()
// is the forward (or forward and backward) the warm-up measures and the timing repeats.
struct GdrCall {
  Tensor q, k, v, g, beta, d_o;
  ops::GdrOptions opt;
  bool fwd_bwd = false;
  Device dev;

  // Outputs and gradients of one call (kept only when asked).
  struct Result {
    Tensor o, dq, dk, dv, dg, dbeta;
    int64_t residual_bytes = 0;
  };
  Result run(bool keep) const {
    std::vector<Tensor> x{q.detach(), k.detach(), v.detach(), g.detach(),
                          beta.defined() ? beta.detach() : Tensor()};
    Result r;
    if (!fwd_bwd) {
      autograd::NoGradGuard ng;
      r.o = ops::gated_delta_rule(x[0], x[1], x[2], x[3], x[4], opt).o;
    } else {
      for (auto& t : x)
        if (t.defined()) t.set_requires_grad(true);
      auto out = ops::gated_delta_rule(x[0], x[1], x[2], x[3], x[4], opt);
      if (keep) r.residual_bytes = out.o.grad_fn()->saved_bytes() - inputs_bytes();
      out.o.backward(d_o);
      if (keep) {
        r.o = out.o.detach();
        r.dq = x[0].grad(), r.dk = x[1].grad(), r.dv = x[2].grad(), r.dg = x[3].grad();
        if (x[4].defined()) r.dbeta = x[4].grad();
      }
    }
    device_synchronize(dev);
    return r;
  }
  int64_t inputs_bytes() const {
    return int64_t(q.nbytes() + k.nbytes() + v.nbytes() + g.nbytes() +
                   (beta.defined() ? beta.nbytes() : 0));
  }
};

GdrCall gdr_call(const BenchArgs& a, const Case& c, const gdr::Implementation& impl,
                 const std::string& mode, const CaseInputs& in64) {
  GdrCall call;
  call.dev = parse_device(a.device);
  call.fwd_bwd = mode == "fwd_bwd";
  call.opt.use(impl);
  call.opt.chunk_size = c.chunk;
  call.opt.cu_seqlens = c.cu_seqlens;
  auto to_case = [&](const Tensor& t) { return ops::to_device(ops::cast(t, c.dtype), call.dev); };
  call.q = to_case(in64.q), call.k = to_case(in64.k), call.v = to_case(in64.v);
  call.g = to_case(in64.g), call.d_o = to_case(in64.d_o);
  if (impl.delta_rule) call.beta = to_case(in64.beta);
  return call;
}

// The warm-up call, measured: its outputs (for the errors) and the row's memory fields.
GdrCall::Result measure_memory(const GdrCall& call, int64_t others_bytes, json& r) {
  reset_peak_memory(call.dev);
  const MemoryStats before = memory_stats(call.dev);
  GdrCall::Result out = call.run(true);
  const MemoryStats s = memory_stats(call.dev);
  // Scratch beyond what was live before, the outputs and the gradients.
  const int64_t temp_peak = s.max[int(MemCategory::temp)] + s.max[int(MemCategory::workspace)] -
                            before.cur(MemCategory::temp) - before.cur(MemCategory::workspace);
  const double mb = 1.0 / (1024.0 * 1024.0);
  r["temp_mb"] = double(temp_peak) * mb;
  r["residual_mb"] = double(out.residual_bytes) * mb;
  r["peak_mb"] = double(s.peak - others_bytes) * mb;  // without other rows' kept inputs
  r["inputs_mb"] = double(call.inputs_bytes()) * mb;
  return out;
}

// A CUDA fused row's plan: its V tile and chunk, or why the chunked kernels ran instead.
void fused_plan_fields(const gdr::Problem& p, const GdrCall& call, DType dtype, json& r) {
#if defined(GDN_WITH_CUDA)
  if (!call.dev.is_cuda() || p.impl != gdr::Impl::fused) return;
  const int64_t in_bytes = dtype_size(dtype);
  for (bool backward : {false, true}) {
    if (backward && !call.fwd_bwd) continue;
    const std::string why = gdr::cuda_fused_fallback(p, backward, in_bytes);
    if (!why.empty()) r[backward ? "fallback_bwd" : "fallback_fwd"] = "chunked: " + why;
  }
  if (r.contains("fallback_fwd") || r.contains("fallback_bwd")) {
    std::fprintf(stderr, "gdn bench: fused ran as chunked on this GPU (%s)\n",
                 std::string(r.value("fallback_fwd", r.value("fallback_bwd", ""))).c_str());
  } else {
    const gdr::fused::Plan plan = gdr::cuda_fused_plan(p, call.fwd_bwd, in_bytes);
    r["fused_vt"] = plan.vt;
    r["fused_sub"] = plan.sub;  // the kernels' chunk: p.chunk, or sub-chunks where it did not fit
  }
#else
  (void)p, (void)call, (void)dtype, (void)r;
#endif
}

// rel_err of o and of every gradient against the fp64 reference.
void error_fields(const GdrCall::Result& out, const Reference& ref, bool fwd_bwd, json& r) {
  r["rel_err"] = rel_err(out.o.to_vector(), ref.o);
  if (!fwd_bwd) return;
  json e = {{"q", rel_err(out.dq.to_vector(), ref.dq)},
            {"k", rel_err(out.dk.to_vector(), ref.dk)},
            {"v", rel_err(out.dv.to_vector(), ref.dv)},
            {"log_alpha", rel_err(out.dg.to_vector(), ref.dg)}};
  if (out.dbeta.defined()) e["beta"] = rel_err(out.dbeta.to_vector(), ref.dbeta);
  r["rel_err_grads"] = e;
}

// Runs and measures one row: the warm-up call (memory, errors), then the timing; `timed` (when
// given) receives its timed call. others_bytes: device memory kept alive by other rows' timed
// calls, left out of peak_mb.
json run_case(const BenchArgs& a, const Case& c, const gdr::Implementation& impl,
              const std::string& mode, const CaseInputs& in64, const Reference* ref,
              const DevicePeak& peak, TimedCall* timed, int64_t others_bytes) {
  const GdrCall call = gdr_call(a, c, impl, mode, in64);
  json r = row_of(impl.name, mode, c);
  r["device"] = call.dev.str();
  const GdrCall::Result out = measure_memory(call, others_bytes, r);
  // The timed call keeps copies of the inputs, so it outlives this function.
  const std::function<void()> timed_call = [call] { call.run(false); };
  const Timing t = time_it(timed_call, a.repeats, a.min_sample_ms);
  if (timed) {
    // Bytes the call keeps alive beyond the case's own fp64 inputs (which it aliases when the
    // case runs in fp64 on the CPU).
    int64_t held = 0;
    const std::pair<const Tensor*, const Tensor*> kept[] = {
        {&call.q, &in64.q}, {&call.k, &in64.k},       {&call.v, &in64.v},
        {&call.g, &in64.g}, {&call.beta, &in64.beta}, {&call.d_o, &in64.d_o}};
    for (const auto& [x, x64] : kept)
      if (x->defined() && x->storage() != x64->storage()) held += int64_t(x->nbytes());
    *timed = TimedCall{timed_call, t.inner, held};
  }
  r["inner"] = t.inner;
  r["median_ms"] = t.median_ms;
  r["q1_ms"] = t.q1_ms;
  r["q3_ms"] = t.q3_ms;
  const gdr::Problem p =
      ops::gdr_problem(call.q, call.k, call.v, call.g, call.beta, call.opt, Tensor());
  fused_plan_fields(p, call, c.dtype, r);
  const double flops = gdr::forward_flops(p) + (call.fwd_bwd ? gdr::backward_flops(p) : 0.0);
  r["gflops"] = flops / (t.median_ms * 1e-3) * 1e-9;
  add_peak_fields(peak, r);
  if (ref) error_fields(out, *ref, call.fwd_bwd, r);
  return r;
}

void apply_preset(BenchArgs& a) {
  if (a.preset.empty()) return;
  GDN_CHECK(a.preset == "seed", "unknown --preset '", a.preset, "' (known: seed)");
  // The seed's sweep: B=4 H=8, T 512/2048/8192, K=V 64/128, bf16 and fp32, C=64, 5 repeats.
  a.batch = 4;
  a.heads = 8;
  a.seqs = {512, 2048, 8192};
  a.dims = {64, 128};
  a.dtypes = {"bfloat16", "float32"};
  a.chunks = {64};
  a.repeats = 5;
  a.impls.clear();
  for (const gdr::Implementation& i : gdr::implementations()) a.impls.push_back(i.name);
}

// The device of --device, or for a CUDA device this machine lacks, cuda:N with the reason in
// *no_device (its rows say it; the sweep still writes its JSON).
Device bench_device(const std::string& name, std::string* no_device) {
  try {
    return parse_device(name);
  } catch (const Error& e) {
    if (name.rfind("cuda", 0) != 0) throw;
    *no_device = std::string("no device: ") + e.what();
    const size_t colon = name.find(':');
    return Device::cuda(colon == std::string::npos ? 0 : std::atoi(name.c_str() + colon + 1));
  }
}

// What the row families of one sweep share: the flags, the device (or why it is missing), its
// peak, the progress line, the rows so far and the unpacked rows that packed rows compare with.
struct Sweep {
  Sweep(const BenchArgs& args, Device device, std::string why_no_device, DevicePeak device_peak)
      : a(args), dev(device), no_device(std::move(why_no_device)), peak(device_peak) {}
  const BenchArgs& a;
  Device dev;
  std::string no_device;  // non-empty: every row is an error row saying so
  DevicePeak peak;
  size_t done = 0, total = 0;
  json results = json::array();
  std::function<void(const json&)> save;
  // The unpacked rows of (row name, mode) for the shape being run: median and timed call.
  std::map<std::pair<std::string, std::string>, std::pair<double, TimedCall>> unpacked;

  void progress(const std::string& what, const Case& c, const std::string& tail) const {
    std::fprintf(stderr, "\r[%zu/%zu] %s B=%lld H=%lld T=%lld D=%lld %s      ", done, total,
                 what.c_str(), (long long)c.B, (long long)c.H, (long long)c.T, (long long)c.D,
                 tail.c_str());
  }
  // Device bytes the kept unpacked calls hold (left out of a row's peak_mb).
  int64_t kept_bytes() const {
    int64_t kept = 0;
    for (const auto& [k, u] : unpacked) kept += u.second.held_bytes;
    return kept;
  }
  // An unpacked row is kept for the packed rows of its shape; a packed row gets the ratio of the
  // two medians and, where both calls were kept, the drift-free ratio of alternating calls.
  void relate_to_unpacked(const Case& c, const std::string& name, const std::string& mode,
                          const TimedCall& timed, json& r) {
    const auto key = std::make_pair(name, mode);
    if (c.cu_seqlens.empty()) {
      unpacked[key] = {double(r["median_ms"]), timed};
    } else if (unpacked.count(key)) {
      r["vs_unpacked_rows"] = double(r["median_ms"]) / unpacked[key].first;
      if (timed.call && unpacked[key].second.call)
        r["vs_unpacked"] = interleaved_ratio(timed, unpacked[key].second, a.repeats);
    }
  }
  void add(const json& r) {
    results.push_back(r);
    save(results);
  }
};

// A family of rows that --impls selects from: the gated delta rule's implementations, or
// attention's kernels. Each runs its rows of a case in turn.
class RowFamily {
 public:
  virtual ~RowFamily() = default;
  virtual size_t rows_per_case() const = 0;
  virtual void run(const Case& c, Sweep& s) = 0;
  // Lines for the end of the run (and the JSON's key for them), from all the rows.
  virtual void summarize(const json&, json&) const {}
};

class GdrRows : public RowFamily {
 public:
  GdrRows(std::vector<const gdr::Implementation*> impls, const BenchArgs& a)
      : impls_(std::move(impls)), a_(a) {}
  size_t rows_per_case() const override { return impls_.size() * a_.modes.size(); }

  void run(const Case& c, Sweep& s) override {
    const CaseInputs in = s.no_device.empty() ? make_inputs(c) : CaseInputs{};
    std::unique_ptr<Reference> ref_gdr, ref_ssd;
    if (!a_.no_reference && s.no_device.empty()) {
      s.progress("fp64 reference", c, "");
      auto needs = [&](bool delta_rule) {
        return std::any_of(impls_.begin(), impls_.end(),
                           [&](const auto* i) { return i->delta_rule == delta_rule; });
      };
      if (needs(true)) ref_gdr = std::make_unique<Reference>(reference(in, false, c));
      if (needs(false)) ref_ssd = std::make_unique<Reference>(reference(in, true, c));
    }
    for (const gdr::Implementation* impl : impls_)
      for (const auto& mode : a_.modes) {
        ++s.done;
        s.progress(std::string(impl->name) + " " + mode, c,
                   std::string(dtype_name(c.dtype)) + " C=" + std::to_string(c.chunk));
        const Reference* ref = impl->delta_rule ? ref_gdr.get() : ref_ssd.get();
        json r;
        try {
          if (!s.no_device.empty()) throw std::runtime_error(s.no_device);
          TimedCall timed;
          r = run_case(a_, c, *impl, mode, in, ref, s.peak, &timed, s.kept_bytes());
          s.relate_to_unpacked(c, impl->name, mode, timed, r);
        } catch (const std::exception& e) {
          r = row_of(impl->name, mode, c);
          r["error"] = e.what();
        }
        s.add(r);
      }
  }

 private:
  std::vector<const gdr::Implementation*> impls_;
  const BenchArgs& a_;
};

// Attention does not depend on the chunk size: its rows go with the first. The rows of a window
// share their inputs and the fp64 reference.
class AttentionRows : public RowFamily {
 public:
  AttentionRows(std::vector<const attn::Implementation*> kernels, const BenchArgs& a,
                bool beside_gdr)
      : kernels_(std::move(kernels)), a_(a), beside_gdr_(beside_gdr) {}
  size_t rows_per_case() const override {
    return kernels_.size() * a_.windows.size() * a_.modes.size();
  }

  void run(const Case& c, Sweep& s) override {
    const bool any_fwd_bwd =
        std::find(a_.modes.begin(), a_.modes.end(), "fwd_bwd") != a_.modes.end();
    const std::string reference = a_.no_reference ? "" : any_fwd_bwd ? "fwd_bwd" : "fwd";
    for (int64_t w : a_.windows) {
      const AttentionCase ac{c.B, c.H, c.T, c.D, c.dtype, w, c.cu_seqlens};
      std::unique_ptr<AttentionInputs> in;
      std::string inputs_error;
      for (const attn::Implementation* kernel : kernels_)
        for (const auto& mode : a_.modes) {
          ++s.done;
          if (c.chunk != a_.chunks.front()) continue;
          const std::string name = kernel->name;
          const std::string at_window = " w=" + std::to_string(w);
          json r;
          try {
            if (!s.no_device.empty()) throw std::runtime_error(s.no_device);
            if (!in && inputs_error.empty()) {
              s.progress(
                  reference.empty() ? "attention inputs" : "attention inputs and fp64 reference", c,
                  at_window);
              try {
                in = std::make_unique<AttentionInputs>(attention_inputs(ac, reference));
              } catch (const std::exception& e) {
                inputs_error = e.what();
              }
            }
            if (!inputs_error.empty()) throw std::runtime_error(inputs_error);
            s.progress(name + " " + mode, c, std::string(dtype_name(c.dtype)) + at_window);
            r = run_attention_case(ac, *kernel, mode, s.dev, a_.repeats, a_.min_sample_ms, s.peak,
                                   *in);
            s.relate_to_unpacked(c, name + "@" + std::to_string(w), mode, TimedCall{}, r);
          } catch (const std::exception& e) {
            r = attention_row(ac, name, mode);
            r["device"] = s.dev.str();
            r["error"] = e.what();
          }
          s.add(r);
        }
    }
  }

  // Where in T attention costs more than each gated-delta-rule row, when both were run.
  void summarize(const json& results, json& doc) const override {
    if (!beside_gdr_) return;
    const std::vector<std::string> crossings = attention_crossovers(results);
    for (const std::string& line : crossings) std::printf("%s\n", line.c_str());
    doc["attention_crossovers"] = crossings;
  }

 private:
  std::vector<const attn::Implementation*> kernels_;
  const BenchArgs& a_;
  bool beside_gdr_;
};

// Kimi Delta Attention (--op kda): its implementations at the case's shape. The rows of a case
// share their inputs and the fp64 reference.
class KdaRows : public RowFamily {
 public:
  KdaRows(std::vector<const kda::Implementation*> impls, const BenchArgs& a)
      : impls_(std::move(impls)), a_(a) {}
  size_t rows_per_case() const override { return impls_.size() * a_.modes.size(); }

  void run(const Case& c, Sweep& s) override {
    const KdaCase kc{c.B, c.H, c.T, c.D, c.dtype, c.chunk, c.cu_seqlens};
    const bool any_fwd_bwd =
        std::find(a_.modes.begin(), a_.modes.end(), "fwd_bwd") != a_.modes.end();
    std::unique_ptr<KdaInputs> in;
    if (s.no_device.empty()) {
      s.progress("kda inputs and fp64 reference", c, "");
      in = std::make_unique<KdaInputs>(kda_inputs(kc, a_.no_reference ? ""
                                                      : any_fwd_bwd   ? "fwd_bwd"
                                                                      : "fwd"));
    }
    for (const kda::Implementation* impl : impls_)
      for (const auto& mode : a_.modes) {
        ++s.done;
        const std::string name = std::string("kda_") + impl->name;
        s.progress(name + " " + mode, c,
                   std::string(dtype_name(c.dtype)) + " C=" + std::to_string(c.chunk));
        json r;
        try {
          if (!s.no_device.empty()) throw std::runtime_error(s.no_device);
          r = run_kda_case(kc, *impl, mode, s.dev, a_.repeats, a_.min_sample_ms, s.peak, *in);
          s.relate_to_unpacked(c, name, mode, TimedCall{}, r);
        } catch (const std::exception& e) {
          r = kda_row(kc, *impl, mode);
          r["error"] = e.what();
        }
        s.add(r);
      }
  }

 private:
  std::vector<const kda::Implementation*> impls_;
  const BenchArgs& a_;
};

// The families of --op and --impls, in the order gdr, attention, kda. Each --impls name goes to
// every selected op whose table has it (recurrent and chunked are both gdr's and kda's); a name
// no selected op knows fails before any work, naming every known one.
std::vector<std::unique_ptr<RowFamily>> row_families(const BenchArgs& a, Device dev) {
  const auto selected = [&](const char* op) {
    return std::find(a.ops.begin(), a.ops.end(), op) != a.ops.end();
  };
  for (const auto& op : a.ops)
    GDN_CHECK(op == "gdr" || op == "kda", "--op ", op, ": unknown (known: gdr, kda)");
  const bool gdr_op = selected("gdr"), kda_op = selected("kda");
  const bool explicit_impls = a.impls != BenchArgs{}.impls;
  std::vector<const gdr::Implementation*> impls;
  std::vector<const attn::Implementation*> attention_kernels;
  std::vector<const kda::Implementation*> kda_impls;
  for (const auto& name : a.impls) {
    bool known = false;
    if (gdr_op && attn::is_implementation(name)) {
      attention_kernels.push_back(&attention_entry(name, dev));
      continue;
    }
    for (const gdr::Implementation& i : gdr::implementations())
      if (gdr_op && name == i.name) impls.push_back(&i), known = true;
    for (const kda::Implementation& i : kda::implementations())
      if (kda_op && name == i.name) kda_impls.push_back(&i), known = true;
    // The default list names gdr's implementations; kda takes those it has.
    GDN_CHECK(known || (!explicit_impls && !gdr_op), "--impls ", name, ": unknown (known: ",
              gdr_op ? gdr::implementation_names() + ", " + attn::implementation_names(true) +
                           ", and on CUDA " + attn::cuda_only_names()
                     : "",
              gdr_op && kda_op ? "; " : "", kda_op ? "kda: " + kda::implementation_names() : "",
              ")");
  }
  std::vector<std::unique_ptr<RowFamily>> families;
  const bool with_gdr = !impls.empty();
  if (with_gdr) families.push_back(std::make_unique<GdrRows>(std::move(impls), a));
  if (!attention_kernels.empty())
    families.push_back(std::make_unique<AttentionRows>(std::move(attention_kernels), a, with_gdr));
  if (!kda_impls.empty()) families.push_back(std::make_unique<KdaRows>(std::move(kda_impls), a));
  return families;
}

// The sweep's configuration, as the JSON's "config" records it.
json config_of(const BenchArgs& a, Device dev, bool attention) {
  json config = {{"device", dev.str()},     {"ops", a.ops},        {"batch", a.batch},
                 {"heads", a.heads},        {"seq_lens", a.seqs},  {"dims", a.dims},
                 {"dtypes", a.dtypes},      {"impls", a.impls},    {"modes", a.modes},
                 {"chunk_sizes", a.chunks}, {"repeats", a.repeats}};
  if (!a.docs.empty()) config["docs"] = a.docs;
  if (!a.doc_lens.empty()) config["doc_lens"] = a.doc_lens;
  if (attention) config["windows"] = a.windows;
  return config;
}

void run(BenchArgs a) {
  apply_preset(a);
  std::string no_device;
  const Device dev = bench_device(a.device, &no_device);
  const std::vector<std::unique_ptr<RowFamily>> families = row_families(a, dev);
  const bool attention = std::any_of(a.impls.begin(), a.impls.end(),
                                     [](const auto& n) { return attn::is_implementation(n); });
  for (int64_t w : a.windows) GDN_CHECK(w >= 0, "--window ", w, ": must be >= 0 (0: full causal)");
  Sweep s(a, dev, no_device, measure_peak(dev, a.peak_gflops));
  json doc = {{"device", device_info(dev, s.peak)},
              {"config", config_of(a, dev, attention)},
              {"results", json::array()}};
  if (!no_device.empty()) doc["device"]["error"] = no_device;
  // The rows so far, to --out: rewritten after every row.
  s.save = [&](const json& results) {
    if (a.out.empty()) return;
    doc["results"] = results;
    io::write_file_atomic(a.out, doc.dump(1) + "\n");
  };
  std::vector<Case> cases;  // each shape unpacked, then its packings (--docs, --doc-lens)
  for (const auto& dts : a.dtypes)
    for (int64_t T : a.seqs)
      for (int64_t D : a.dims)
        for (int C : a.chunks)
          for (const auto& lens : packings(a, T))
            cases.push_back({a.batch, a.heads, T, D, parse_dtype(dts), C, offsets_of(lens)});
  for (const auto& f : families) s.total += cases.size() * f->rows_per_case();
  for (const Case& c : cases) {
    if (c.cu_seqlens.empty()) s.unpacked.clear();  // a new shape starts with its unpacked rows
    for (const auto& f : families) f->run(c, s);
  }
  std::fprintf(stderr, "\r%-100s\r", "");
  const json& results = s.results;
  doc["results"] = results;
  std::fputs(format_table(results).c_str(), stdout);
  for (const auto& f : families) f->summarize(results, doc);
  if (!a.out.empty()) {
    io::write_file_atomic(a.out, doc.dump(1) + "\n");
    std::printf("wrote %s\n", a.out.c_str());
  }
  // A sweep with failed rows is a failed run, also for scripts: the JSON above keeps the rows.
  size_t failed = 0;
  for (const auto& r : results) failed += r.contains("error") ? 1 : 0;
  if (failed > 0) {
    std::fflush(stdout);
    std::fprintf(stderr, "gdn bench: %zu of %zu results failed (their rows carry \"error\")%s\n",
                 failed, results.size(), no_device.empty() ? "" : (": " + no_device).c_str());
    throw CLI::RuntimeError(kRowsFailed);
  }
}

}  // namespace

void add_bench_command(CLI::App& app) {
  const auto [cmd, a] = add_command<BenchArgs>(
      app, "bench",
      "Benchmark the gated-delta-rule kernels and attention (seed schema); exit status 2 when a "
      "result failed",
      run);
  cmd->add_option("--impls", a->impls,
                  gdr::implementation_names() +
                      ",attention (the device's choice); on CUDA also attention_flash (our "
                      "kernel), attention_cudnn (cuDNN's fused attention, bf16)")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--op", a->ops,
                  "gdr (the gated delta rule, and attention rows), kda (Kimi Delta Attention: "
                  "rows kda_<impl> of --impls " +
                      kda::implementation_names() + "), or gdr,kda: both in one sweep")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--modes", a->modes, "fwd,fwd_bwd")->delimiter(',')->capture_default_str();
  cmd->add_option("--batch", a->batch, "batch size B")
      ->check(whole_number(1))
      ->capture_default_str();
  cmd->add_option("--heads", a->heads, "heads H (= HV)")
      ->check(whole_number(1))
      ->capture_default_str();
  cmd->add_option("--seq", a->seqs, "sequence lengths")
      ->delimiter(',')
      ->check(whole_number(1))
      ->capture_default_str();
  cmd->add_option("--dims", a->dims, "head dims (K = V)")
      ->delimiter(',')
      ->check(whole_number(1))
      ->capture_default_str();
  cmd->add_option("--dtypes", a->dtypes, "float32,bfloat16,float64")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--chunk-sizes", a->chunks, "16,32,64")->delimiter(',')->capture_default_str();
  cmd->add_option("--repeats", a->repeats, "timed samples per result")
      ->check(whole_number(1, 1000000))
      ->capture_default_str();
  cmd->add_option("--min-sample-ms", a->min_sample_ms,
                  "inner iterations per sample reach at least this time")
      ->check(real_number(0))
      ->capture_default_str();
  cmd->add_option("--device", a->device, "cpu or cuda")->capture_default_str();
  cmd->add_option("--out", a->out, "write the JSON here");
  cmd->add_option("--preset", a->preset, "seed: the seed benchmark's exact sweep");
  cmd->add_flag("--no-reference", a->no_reference, "skip the fp64 reference (no rel_err)");
  cmd->add_option("--docs", a->docs,
                  "also pack N equal sequences into each row (cu_seqlens; B = 1, T divisible by "
                  "N), for each N; rows report vs_unpacked")
      ->delimiter(',')
      ->check(whole_number(1));
  cmd->add_option("--peak-gflops", a->peak_gflops,
                  "the device's peak GFLOP/s for %peak (CPU default: the fp32 GEMM peak, "
                  "measured and cached per machine)")
      ->check(real_number(0, std::numeric_limits<double>::max(), /*above_min=*/true));
  cmd->add_option("--window", a->windows,
                  "attention rows: sliding windows (a query sees itself and w - 1 keys before), "
                  "0 = full causal; a list runs each")
      ->delimiter(',')
      ->check(whole_number(0))
      ->capture_default_str();
  cmd->add_option("--doc-lens", a->doc_lens,
                  "also pack sequences of these lengths (their sum is T; B = 1)")
      ->delimiter(',')
      ->check(whole_number(1));
}

}  // namespace gdn::cli
