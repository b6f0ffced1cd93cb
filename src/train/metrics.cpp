// Metrics log and progress formatting.
#include "src/train/metrics.h"

#include <cmath>
#include <filesystem>

#include "src/core/allocator.h"
#include "src/core/error.h"

namespace gdn::train {

std::string metrics_kept_through(const std::string& text, int64_t keep_through_step) {
  std::string kept;
  size_t begin = 0;
  while (begin < text.size()) {
    const size_t end = text.find('\n', begin);
    if (end == std::string::npos) break;  // a torn last line from a crash: dropped
    const std::string line = text.substr(begin, end - begin);
    begin = end + 1;
    try {
      const auto j = nlohmann::json::parse(line);
      if (j.is_object() && j.value("step", int64_t(0)) <= keep_through_step) kept += line + "\n";
    } catch (const nlohmann::json::exception&) {
      // Malformed: dropped.
    }
  }
  return kept;
}

MetricsLog::MetricsLog(const std::string& path, int64_t keep_through_step) : path_(path) {
  std::error_code ec;
  if (keep_through_step >= 0 && std::filesystem::exists(path, ec)) {
    const std::string text = io::read_regular_file(path);
    const std::string kept = metrics_kept_through(text, keep_through_step);
    // Rewritten only when something goes; through a temporary file, so a failed rewrite (a
    // full disk) keeps the old file whole.
    if (kept != text) io::write_file_atomic(path, kept);
  }
  file_ = std::make_unique<io::AppendFile>(path);
}

void MetricsLog::write(const nlohmann::json& record) {
  file_->append(record.dump() + "\n");
  if (!events_) return;
  const int64_t step = record.value("step", int64_t(0));
  const double now = io::unix_seconds_now();
  for (const auto& [name, value] : record.items())
    if (name != "step" && value.is_number())
      events_->add_scalar(name, value.get<double>(), step, now);
  events_->flush();
}

std::string format_duration(double s) {
  if (!std::isfinite(s) || s < 0) return "?";
  char buf[32];
  const long t = long(s + 0.5);
  if (t >= 3600)
    std::snprintf(buf, sizeof buf, "%ldh%02ldm", t / 3600, (t % 3600) / 60);
  else if (t >= 60)
    std::snprintf(buf, sizeof buf, "%ldm%02lds", t / 60, t % 60);
  else
    std::snprintf(buf, sizeof buf, "%lds", t);
  return buf;
}

std::string format_count(double x) {
  char buf[32];
  if (x >= 1e9)
    std::snprintf(buf, sizeof buf, "%.2fG", x / 1e9);
  else if (x >= 1e6)
    std::snprintf(buf, sizeof buf, "%.2fM", x / 1e6);
  else if (x >= 1e3)
    std::snprintf(buf, sizeof buf, "%.1fk", x / 1e3);
  else
    std::snprintf(buf, sizeof buf, "%.0f", x);
  return buf;
}

std::string progress_line(int64_t step, int64_t total, double loss, double lr, double tokens_per_s,
                          double mfu, int64_t mem_bytes, double eta_s, double of_gemm_bound) {
  const int width = 20;
  const int filled = total > 0 ? int(double(width) * double(step) / double(total)) : width;
  std::string bar(size_t(std::min(filled, width)), '#');
  bar.resize(size_t(width), '.');
  char bound[48] = "";
  if (of_gemm_bound > 0)
    std::snprintf(bound, sizeof bound, " | %.0f%% of GEMM bound", 100.0 * of_gemm_bound);
  char buf[320];
  std::snprintf(
      buf, sizeof buf,
      "step %lld/%lld [%s] loss %.4f | lr %.2e | %s tok/s | MFU %.1f%%%s | mem %s | ETA %s",
      (long long)step, (long long)total, bar.c_str(), loss, lr, format_count(tokens_per_s).c_str(),
      100.0 * mfu, bound, format_bytes(mem_bytes).c_str(), format_duration(eta_s).c_str());
  return buf;
}

}  // namespace gdn::train
