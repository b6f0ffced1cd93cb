// Benchmark helpers: timing with inner iterations and quartiles, the device's measured peak
// (CPU: this machine's sgemm), device facts for the JSON, and the result table.
#pragma once
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "src/core/device.h"

namespace gdn::cli {

struct Timing {
  int inner = 1;
  double median_ms = 0, q1_ms = 0, q3_ms = 0;
};
// Runs fn `inner` times per sample (inner chosen so a sample takes >= min_sample_ms, or given:
// then no calibration call), for `repeats` samples; per-call milliseconds.
Timing time_it(const std::function<void()>& fn, int repeats, double min_sample_ms, int inner = 0);

struct DevicePeak {
  double gflops = 0;  // fp32 GEMM GFLOP/s measured on this device (0 if unknown)
  std::string how;
  double this_run_gflops = 0;  // CPU: the sgemm rate measured in this run (0 if not measured)
};
// CPU: the machine's fp32 GEMM peak (src/train/machine_peak.h), re-measured, or `given_gflops`
// when > 0 (--peak-gflops).
DevicePeak measure_peak(Device dev, double given_gflops = 0);
void device_synchronize(Device dev);
nlohmann::json device_info(Device dev, const DevicePeak& peak);
// A result row's share of the peak from its "gflops": peak_gflops and frac_peak (of the best rate
// the machine has shown), frac_peak_this_run (of the sgemm rate measured in this run, CPU).
void add_peak_fields(const DevicePeak& peak, nlohmann::json& row);

// The fields that name a kernel row of the seed schema (impl, mode, batch, heads, seq, dk = dv,
// dtype, chunk_size), and for packed sequences (cu_seqlens) their number and lengths.
nlohmann::json kernel_row(const std::string& impl, const std::string& mode, int64_t B, int64_t H,
                          int64_t T, int64_t D, const std::string& dtype, int chunk,
                          const std::vector<int64_t>& cu_seqlens);

double rel_err(const std::vector<double>& x, const std::vector<double>& ref);
std::string format_table(const nlohmann::json& results);

}  // namespace gdn::cli
