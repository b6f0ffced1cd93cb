// Named ranges for profilers: NVTX ranges (Nsight Systems shows one per layer) when the CUDA
// backend is built, nothing otherwise. NVTX calls cost nothing measurable without a profiler.
#pragma once
#include <string>

namespace gdn {

class TraceRange {
 public:
  explicit TraceRange(const std::string& name);
  ~TraceRange();
  TraceRange(const TraceRange&) = delete;
  TraceRange& operator=(const TraceRange&) = delete;
};

}  // namespace gdn
