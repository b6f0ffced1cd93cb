// The run's metrics.jsonl (one JSON object per line, written through as logged, every write
// checked), optionally mirrored into TensorBoard event files, and the progress line (step, loss,
// lr, tokens/s, MFU, memory, ETA).
#pragma once
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "src/io/atomic_file.h"
#include "src/io/tensorboard.h"

namespace gdn::train {

class MetricsLog {
 public:
  // Opens for appending. With `keep_through_step` >= 0 (a resume), records of later steps (and
  // a torn last line) are dropped first, so the file continues exactly where the checkpoint was
  // taken; that rewrite is atomic, and when it fails the old file is kept and the error names it.
  MetricsLog(const std::string& path, int64_t keep_through_step = -1);
  // One record as one line; a failed write (a full disk) throws naming the file.
  // With an attached writer, also every numeric field of the record (not `step`; booleans,
  // nulls and strings neither) as a TensorBoard scalar tagged with its name at the record's
  // step, flushed with the record.
  void write(const nlohmann::json& record);
  void attach(std::unique_ptr<io::EventWriter> events) { events_ = std::move(events); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::unique_ptr<io::AppendFile> file_;
  std::unique_ptr<io::EventWriter> events_;
};

// The lines of a metrics.jsonl text kept by a resume at `keep_through_step`: every whole record
// of a step up to it (malformed and torn lines dropped), each ending in a newline.
std::string metrics_kept_through(const std::string& text, int64_t keep_through_step);

// "1h02m", "3m12s", "45s".
std::string format_duration(double seconds);
// "12.3k", "1.2M".
std::string format_count(double x);

// One progress line: `step 120/1000 [####......] loss 2.345 | lr 3.0e-04 | 12.3k tok/s | ...`;
// `of_gemm_bound` (src/train/gemm_bound.h) is shown when > 0.
std::string progress_line(int64_t step, int64_t total, double loss, double lr, double tokens_per_s,
                          double mfu, int64_t mem_bytes, double eta_s, double of_gemm_bound = 0);

}  // namespace gdn::train
