// The run's metrics.jsonl (one JSON object per line, flushed as written) and the progress line
// (step, loss, lr, tokens/s, MFU, memory, ETA).
#pragma once
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

namespace gdn::train {

class MetricsLog {
 public:
  // Opens for appending. With `keep_through_step` >= 0 (a resume), records of later steps are
  // dropped first, so the file continues exactly where the checkpoint was taken.
  MetricsLog(const std::string& path, int64_t keep_through_step = -1);
  ~MetricsLog();
  MetricsLog(const MetricsLog&) = delete;
  MetricsLog& operator=(const MetricsLog&) = delete;
  void write(const nlohmann::json& record);
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::FILE* f_ = nullptr;
};

// "1h02m", "3m12s", "45s".
std::string format_duration(double seconds);
// "12.3k", "1.2M".
std::string format_count(double x);

// One progress line: `step 120/1000 [####......] loss 2.345 | lr 3.0e-04 | 12.3k tok/s | ...`
std::string progress_line(int64_t step, int64_t total, double loss, double lr, double tokens_per_s,
                          double mfu, int64_t mem_bytes, double eta_s);

}  // namespace gdn::train
