// Benchmark helpers.
#include "src/cli/bench_util.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <thread>

#include "kernels/cpu/blas_select.h"
#include "kernels/cpu/gemm.h"
#include "src/ops/ops.h"
#include "src/train/machine_peak.h"
#if defined(GDN_WITH_CUDA)
#include "src/core/cuda/cuda_context.h"
#endif

namespace gdn::cli {

namespace {
double now_ms() {
  using clock = std::chrono::steady_clock;
  return std::chrono::duration<double, std::milli>(clock::now().time_since_epoch()).count();
}
double quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  const double pos = q * double(v.size() - 1);
  const size_t lo = size_t(std::floor(pos)), hi = size_t(std::ceil(pos));
  return v[lo] + (v[hi] - v[lo]) * (pos - double(lo));
}
std::string cpu_model() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown";
}
}  // namespace

Timing time_it(const std::function<void()>& fn, int repeats, double min_sample_ms, int inner) {
  Timing t;
  t.inner = inner;
  if (inner < 1) {
    double t0 = now_ms();
    fn();
    double one = std::max(now_ms() - t0, 1e-3);
    t.inner = std::max(1, int(std::ceil(min_sample_ms / one)));
  }
  std::vector<double> samples;
  for (int r = 0; r < std::max(repeats, 1); ++r) {
    double s = now_ms();
    for (int i = 0; i < t.inner; ++i) fn();
    samples.push_back((now_ms() - s) / t.inner);
  }
  t.median_ms = quantile(samples, 0.5);
  t.q1_ms = quantile(samples, 0.25);
  t.q3_ms = quantile(samples, 0.75);
  return t;
}

DevicePeak measure_peak(Device dev, double given_gflops) {
  DevicePeak p;
  if (!dev.is_cpu()) return p;  // CUDA peaks come from the device tables (CUDA backend)
  // Measured again (the bench has the seconds to spare); the cache keeps the best seen.
  const train::CpuPeak peak = train::cpu_peak(given_gflops, true);
  p.gflops = peak.gflops;
  p.this_run_gflops = peak.measured_gflops;
  p.how = peak.how + (peak.source == "measured" || peak.source == "given"
                          ? ""
                          : " (" + peak.source + ", the best this machine has shown)");
  return p;
}

void device_synchronize(Device dev) {
#if defined(GDN_WITH_CUDA)
  if (dev.is_cuda()) cuda::synchronize(dev.index);
#else
  (void)dev;
#endif
}

nlohmann::json device_info(Device dev, const DevicePeak& peak) {
  nlohmann::json d = {{"backend", dev.is_cuda() ? "gpu" : "cpu"},
                      {"devices", {dev.str()}},
                      {"framework", "gdn 0.1.0"}};
  if (dev.is_cpu()) {
    d["cpu"] = cpu_model();
    d["threads"] = cpu::num_threads();
    const cpu::BlasKernels& blas = cpu::blas_kernels();
    if (!blas.used.empty()) d["blas"] = {{"kernels", blas.used}, {"how", blas.why}};
  }
  if (peak.gflops > 0) {
    d["peak_gflops_fp32"] = peak.gflops;
    d["peak_how"] = peak.how;
  }
  if (peak.this_run_gflops > 0) d["peak_gflops_fp32_this_run"] = peak.this_run_gflops;
  return d;
}

void add_peak_fields(const DevicePeak& peak, nlohmann::json& row) {
  if (peak.gflops > 0) {
    row["peak_gflops"] = peak.gflops;
    row["frac_peak"] = double(row["gflops"]) / peak.gflops;
  }
  if (peak.this_run_gflops > 0) {
    row["frac_peak_this_run"] = double(row["gflops"]) / peak.this_run_gflops;
    // The row's FLOPs at the sgemm rate of this run: its time's limit, and how close it came.
    if (row.contains("median_ms")) {
      row["gemm_bound_ms"] =
          double(row["gflops"]) * double(row["median_ms"]) / peak.this_run_gflops;
      row["of_gemm_bound"] = row["frac_peak_this_run"];
    }
  }
}

nlohmann::json kernel_row(const std::string& impl, const std::string& mode, int64_t B, int64_t H,
                          int64_t T, int64_t D, const std::string& dtype, int chunk,
                          const std::vector<int64_t>& cu_seqlens) {
  nlohmann::json r = {{"impl", impl}, {"mode", mode},   {"batch", B},
                      {"heads", H},   {"seq", T},       {"dk", D},
                      {"dv", D},      {"dtype", dtype}, {"chunk_size", chunk}};
  if (!cu_seqlens.empty()) {
    std::vector<int64_t> lens;
    for (size_t i = 1; i < cu_seqlens.size(); ++i)
      lens.push_back(cu_seqlens[i] - cu_seqlens[i - 1]);
    r["docs"] = int64_t(lens.size());
    r["doc_lens"] = lens;
  }
  return r;
}

double rel_err(const std::vector<double>& x, const std::vector<double>& ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < x.size() && i < ref.size(); ++i) {
    num = std::max(num, std::abs(x[i] - ref[i]));
    den = std::max(den, std::abs(ref[i]));
    if (!std::isfinite(x[i])) num = INFINITY;
  }
  return den > 0 ? num / den : num;
}

namespace {
// The packing column: the number of packed sequences, "-" for an unpacked row.
std::string docs_of(const nlohmann::json& r) {
  return r.contains("docs") ? std::to_string(r["docs"].get<long long>()) : "-";
}
// The packed row's time over its unpacked row's ("x1.03"); blank for unpacked rows.
std::string ratio_of(const nlohmann::json& r) {
  if (!r.contains("vs_unpacked")) return "";
  char s[32];
  std::snprintf(s, sizeof s, "x%.3f", double(r["vs_unpacked"]));
  return s;
}
}  // namespace

// A row's name in the table: its impl, and an attention row's window (attention@256).
std::string name_of(const nlohmann::json& r) {
  std::string name = r["impl"].get<std::string>();
  const int64_t window = r.value("window", int64_t(0));
  return window > 0 ? name + "@" + std::to_string(window) : name;
}

std::string format_table(const nlohmann::json& results) {
  std::string out;
  char line[360];
  std::snprintf(line, sizeof line,
                "%-12s %-8s %3s %3s %6s %5s %4s %-9s %10s %9s %7s %10s %9s %9s %9s %7s\n", "impl",
                "mode", "B", "H", "T", "docs", "D", "dtype", "median_ms", "GFLOP/s", "%peak",
                "resid_MB", "peak_MB", "rel_err", "grad_err", "vs_unp");
  out += line;
  for (const auto& r : results) {
    if (r.contains("error")) {
      std::snprintf(
          line, sizeof line, "%-12s %-8s %3lld %3lld %6lld %5s %4lld %-9s  error: %.120s\n",
          name_of(r).c_str(), r["mode"].get<std::string>().c_str(), (long long)r["batch"],
          (long long)r["heads"], (long long)r["seq"], docs_of(r).c_str(), (long long)r["dk"],
          r["dtype"].get<std::string>().c_str(), r["error"].get<std::string>().c_str());
      out += line;
      continue;
    }
    double grad_err = 0;
    if (r.contains("rel_err_grads"))
      for (const auto& [k, v] : r["rel_err_grads"].items())
        grad_err = std::max(grad_err, double(v));
    std::snprintf(
        line, sizeof line,
        "%-12s %-8s %3lld %3lld %6lld %5s %4lld %-9s %10.3f %9.2f %6.1f%% %10.2f %9.1f "
        "%9.2e %9.2e %7s\n",
        name_of(r).c_str(), r["mode"].get<std::string>().c_str(), (long long)r["batch"],
        (long long)r["heads"], (long long)r["seq"], docs_of(r).c_str(), (long long)r["dk"],
        r["dtype"].get<std::string>().c_str(), double(r["median_ms"]), double(r["gflops"]),
        r.contains("frac_peak") ? 100.0 * double(r["frac_peak"]) : 0.0, double(r["residual_mb"]),
        double(r["peak_mb"]), r.contains("rel_err") ? double(r["rel_err"]) : 0.0, grad_err,
        ratio_of(r).c_str());
    out += line;
  }
  return out;
}

}  // namespace gdn::cli
