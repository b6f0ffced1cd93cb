// Loss curves of a run as a self-contained SVG (no plotting library: Debian has none that fits a
// C++ tool, and an SVG opens in any browser): the training loss raw (light) and smoothed by an
// exponential moving average, the validation loss as markers on a line, and the learning rate on
// a secondary axis when the records carry one.
//
// Input: RUN_DIR/metrics.jsonl, one JSON object per line. Training records have "step", "loss"
// and usually "lr"; validation records have "step" and "val_loss". Other objects (events, eval
// metrics) are ignored. Lines that are not JSON objects, or whose step/loss/val_loss/lr has the
// wrong type (a crash can leave half a line) are skipped and counted as malformed. A null loss or
// val_loss (a skipped non-finite step; nlohmann writes NaN as null) is counted, not drawn. A
// resumed run logs some steps twice: the later line of a step wins.
#pragma once
#include <cstdint>
#include <istream>
#include <map>
#include <string>
#include <vector>

namespace gdn::train {

struct SeriesPoint {
  double step = 0;
  double value = 0;
};

struct MetricsSeries {
  std::vector<SeriesPoint> train_loss, val_loss, lr;  // each sorted by step, one point per step
  // Every numeric field of the records by name (loss, lr, grad_norm, tokens_per_s, val_loss,
  // ...), each sorted by step: what `gdn plot --metrics` draws.
  std::map<std::string, std::vector<SeriesPoint>> scalars;
  int64_t lines = 0;       // non-blank lines read
  int64_t malformed = 0;   // of them, skipped as malformed
  int64_t non_finite = 0;  // records with a null loss or val_loss
};

MetricsSeries parse_metrics(std::istream& in);
// Throws when the file is missing or unreadable, and when it holds no loss or val_loss record.
MetricsSeries read_metrics(const std::string& path);

// Debiased exponential moving average (as TensorBoard's smoothing) with alpha = 2 / (span + 1);
// span <= 1 returns the values unchanged. It lags: a falling curve is drawn about span / 2
// points late.
std::vector<double> ema_smooth(const std::vector<double>& values, double span);
// The mean of ema_smooth run forwards and run backwards over the values: a symmetric
// (two-sided exponential) kernel, so the smoothed curve does not lag behind the raw one; both
// ends are debiased. What the plots draw.
std::vector<double> centred_ema_smooth(const std::vector<double>& values, double span);

// An axis: the drawn range [lo, hi] and where its ticks go (values, not pixels).
struct Axis {
  double lo = 0, hi = 1;
  bool log = false;
  std::vector<double> ticks;
};
// Ticks at 1, 2 or 5 x 10^k (Heckbert's nice numbers), about max_ticks of them, the range widened
// to whole ticks so it covers [lo, hi]. An empty range is widened around its value.
Axis linear_axis(double lo, double hi, int max_ticks = 8);
// A log range from the decade below lo (lo > 0) to the first 1, 2 or 5 x 10^k at or above hi;
// ticks at the decades, and at 2 and 5 x 10^k too when the range spans at most 3 decades.
Axis log_axis(double lo, double hi);
// A tick label at a tick spacing: "0.5", "2.5", "1500", "20k", "0.00025", "1e-05".
std::string format_tick(double value, double spacing);

struct PlotOptions {
  std::string title;
  std::string metric = "loss";  // the panel's metric: "loss" adds val_loss and the lr axis
  bool log_x = false;
  double smooth = 20;  // EMA span in points; <= 1: no smoothed line
  bool show_lr = true;
  int width = 960, height = 540;
};

// What render_loss_svg drew, for callers and tests: the axes, the plot area in pixels and the
// number of polylines (one per series).
struct PlotLayout {
  Axis x, y, lr;
  bool has_lr = false;
  double left = 0, top = 0, right = 0, bottom = 0;
  int series = 0;
  int64_t dropped = 0;  // points at step <= 0 left out of a log-x plot
};

// Throws when there is nothing to draw (no training or validation point, or none with step > 0
// on a log x axis).
std::string render_loss_svg(const MetricsSeries& metrics, const PlotOptions& options,
                            PlotLayout* layout = nullptr);

// One panel per metric of `metrics` (names of MetricsSeries::scalars; "loss" is the loss panel
// above), stacked top to bottom, each options.height tall. Throws naming a metric the records
// do not have, and the ones they do.
std::string render_metrics_svg(const MetricsSeries& metrics, const std::vector<std::string>& names,
                               const PlotOptions& options);

// The name a run directory is shown by: its last path component ("runs/tiny/" -> "tiny").
std::string run_name(const std::string& run_dir);

}  // namespace gdn::train
