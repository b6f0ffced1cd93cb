// The CPU's fp32 GEMM peak, measured once per machine and cached (src/train/machine_peak.h).
#include "src/train/machine_peak.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <vector>

#include "kernels/cpu/blas_select.h"
#include "kernels/cpu/gemm.h"
#include "src/io/atomic_file.h"

namespace gdn::train {

namespace {

std::string cpu_model_name() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown CPU";
}

// sgemm n^3 at sizes 512, 1024, 2048: per size the best of up to 7 calls, at most about a
// second of calls per size (a slow BLAS must not take minutes); the best rate of all.
CpuPeak measure() {
  double best = 0;
  std::string best_at;
  for (const int64_t n : {512, 1024, 2048}) {
    std::vector<float> a(size_t(n * n), 1.0f), b(size_t(n * n), 0.5f), c(size_t(n * n));
    const double flops = 2.0 * double(n) * double(n) * double(n);
    double spent = 0;
    for (int r = 0; r < 7 && spent < 1.0; ++r) {
      const auto t0 = std::chrono::steady_clock::now();
      cpu::gemm<float>(false, false, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      spent += s;
      if (flops / s * 1e-9 > best) best = flops / s * 1e-9, best_at = std::to_string(n);
    }
  }
  CpuPeak p;
  p.gflops = best;
  p.how = "best cblas_sgemm of sizes 512, 1024, 2048 (up to 7 calls each) with " +
          std::to_string(cpu::num_threads()) + " threads (best at " + best_at + "^3)";
  p.source = "measured";
  return p;
}

nlohmann::json read_cache(const std::string& file) {
  std::ifstream f(file);
  if (!f) return nlohmann::json::object();
  nlohmann::json j = nlohmann::json::parse(f, nullptr, false);
  return j.is_object() ? j : nlohmann::json::object();  // a damaged cache is measured anew
}

}  // namespace

std::string machine_key() {
  const cpu::BlasKernels& blas = cpu::blas_kernels();
  return cpu_model_name() + " | " + std::to_string(cpu::num_threads()) + " threads | BLAS " +
         (blas.used.empty() ? "unknown" : blas.used);
}

std::string peak_cache_file() {
  namespace fs = std::filesystem;
  fs::path dir;
  if (const char* d = std::getenv("GDN_CACHE_DIR"); d && *d) {
    dir = d;
  } else if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) {
    dir = fs::path(x) / "gdn";
  } else if (const char* h = std::getenv("HOME"); h && *h) {
    dir = fs::path(h) / ".cache" / "gdn";
  } else {
    dir = fs::temp_directory_path() / "gdn";
  }
  return (dir / "cpu-peak.json").string();
}

CpuPeak cpu_peak(double given_gflops, bool remeasure) {
  if (given_gflops > 0) {
    CpuPeak p;
    p.gflops = given_gflops;
    p.how = p.source = "given";
    p.key = machine_key();
    return p;
  }
  // One measurement per process at most (the bench and the trainer may both ask).
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  static CpuPeak known;
  if (known.gflops > 0 && !remeasure) return known;
  const std::string key = machine_key(), file = peak_cache_file();
  nlohmann::json cache = read_cache(file);
  CpuPeak cached;
  if (cache.contains(key) && cache[key].value("gflops", 0.0) > 0) {
    cached.gflops = cache[key]["gflops"];
    cached.how = cache[key].value("how", "");
    cached.source = "cached in " + file;
    cached.key = key;
    if (!remeasure) return known = cached;
  }
  const CpuPeak now = measure();
  cached.measured_gflops = now.gflops;
  if (now.gflops <= cached.gflops) return known = cached;  // the machine has done better
  known = now;
  known.measured_gflops = now.gflops;
  known.key = key;
  cache[key] = {{"gflops", known.gflops}, {"how", known.how}};
  try {
    std::filesystem::create_directories(std::filesystem::path(file).parent_path());
    io::write_file_atomic(file, cache.dump(1) + "\n");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gdn: could not cache the CPU peak (%s); it is measured again next run\n",
                 e.what());
  }
  return known;
}

}  // namespace gdn::train
