// The CPU's fp32 GEMM peak: the denominator of MFU (gdn train) and of "% of peak" (gdn bench).
// A peak measured in a fraction of a second at start-up moves with the machine's load (the same
// run printed MFU 24% and 83%); so it is measured once per machine with enough work to be
// stable, sgemm at 512, 1024 and 2048 with every thread, the best of up to 7 calls per size, and
// cached under the machine's key (CPU model, threads, BLAS kernels) in
// $GDN_CACHE_DIR, else $XDG_CACHE_HOME/gdn, else $HOME/.cache/gdn (file cpu-peak.json). Later runs
// read it; `--peak-gflops` (bench) or `train.peak_gflops` (a config key) give it instead.
#pragma once
#include <string>

namespace gdn::train {

struct CpuPeak {
  double gflops = 0;           // fp32 GEMM GFLOP/s of the whole CPU (every thread)
  std::string how;             // how it was measured
  std::string source;          // "given", "measured", or "cached in FILE"
  std::string key;             // the machine it belongs to
  double measured_gflops = 0;  // what this call measured (remeasure), else 0: the machine now
};

// The peak: `given_gflops` when > 0, else the cache entry of this machine, else measured now
// (and cached; a cache that cannot be written is only a warning). With `remeasure` (gdn bench)
// it is measured again and the cache keeps the better of the two: the peak is the best rate
// the machine has shown, so a load that slowed one measurement does not lower it.
CpuPeak cpu_peak(double given_gflops = 0, bool remeasure = false);

// This machine's key: "CPU model | N threads | BLAS kernels".
std::string machine_key();

// The cache file cpu_peak reads and writes.
std::string peak_cache_file();

}  // namespace gdn::train
