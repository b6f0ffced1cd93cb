// `gdn plot RUN_DIR`: draws RUN_DIR/metrics.jsonl (training loss raw and smoothed, validation
// loss, learning rate; with --metrics also panels of grad norm, tokens/s, ...) into an SVG, by
// default RUN_DIR/loss.svg. Malformed lines (a crash can
// leave half a line) are skipped with a warning rather than failing the plot.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "src/cli/commands.h"
#include "src/cli/flag_checks.h"
#include "src/core/error.h"
#include "src/train/plot.h"

namespace gdn::cli {

namespace {

namespace fs = std::filesystem;

struct PlotArgs {
  std::string run_dir, out;
  bool log_x = false, no_lr = false;
  double smooth = 20;
  int width = 960, height = 540;
  std::vector<std::string> metrics{"loss"};
};

void run(const PlotArgs& a) {
  const std::string metrics_path = (fs::path(a.run_dir) / "metrics.jsonl").string();
  const train::MetricsSeries metrics = train::read_metrics(metrics_path);
  if (metrics.malformed > 0)
    std::fprintf(stderr, "gdn plot: warning: skipped %lld malformed line(s) of %lld in %s\n",
                 static_cast<long long>(metrics.malformed), static_cast<long long>(metrics.lines),
                 metrics_path.c_str());
  if (metrics.non_finite > 0)
    std::fprintf(stderr,
                 "gdn plot: note: %lld step(s) with a non-finite (null) loss are not drawn\n",
                 static_cast<long long>(metrics.non_finite));
  train::PlotOptions options;
  options.title = train::run_name(a.run_dir);
  options.log_x = a.log_x;
  options.smooth = a.smooth;
  options.show_lr = !a.no_lr;
  options.width = a.width;
  options.height = a.height;
  train::PlotLayout layout;
  const bool loss_only = a.metrics == std::vector<std::string>{"loss"};
  const std::string svg = loss_only ? train::render_loss_svg(metrics, options, &layout)
                                    : train::render_metrics_svg(metrics, a.metrics, options);
  if (layout.dropped > 0)
    std::fprintf(stderr, "gdn plot: note: %lld point(s) at step <= 0 are not on the log x axis\n",
                 static_cast<long long>(layout.dropped));
  const std::string out = a.out.empty() ? (fs::path(a.run_dir) / "loss.svg").string() : a.out;
  {
    std::ofstream f(out, std::ios::binary | std::ios::trunc);
    GDN_CHECK(f, "cannot write '", out, "'");
    f << svg;
    f.close();
    GDN_CHECK(f, "failed writing '", out, "'");
  }
  std::printf("wrote %s (%zu train, %zu val points)\n", out.c_str(), metrics.train_loss.size(),
              metrics.val_loss.size());
}

}  // namespace

void add_plot_command(CLI::App& app) {
  auto a = std::make_shared<PlotArgs>();
  auto* cmd = app.add_subcommand("plot", "Plot the loss curves of a run as an SVG");
  cmd->add_option("run_dir", a->run_dir, "run directory holding metrics.jsonl")->required();
  cmd->add_option("--out,-o", a->out, "output SVG (default RUN_DIR/loss.svg)");
  cmd->add_flag("--log-x", a->log_x, "logarithmic step axis");
  cmd->add_option("--metrics", a->metrics,
                  "panels, top to bottom: loss (train and val loss, lr on its own axis) and any "
                  "metric the records carry (lr, grad_norm, tokens_per_s, mfu, mem_bytes, "
                  "val_ppl, ...)")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--smooth", a->smooth,
                  "span in points of the smoothed line: a centred EMA (the mean of an EMA run "
                  "forwards and one run backwards), so it does not lag (<= 1: none)")
      ->check(real_number(-std::numeric_limits<double>::max()))
      ->capture_default_str();
  cmd->add_flag("--no-lr", a->no_lr, "leave out the learning-rate axis");
  cmd->add_option("--width", a->width, "image width in pixels")
      ->check(whole_number(100, 20000))
      ->capture_default_str();
  cmd->add_option("--height", a->height, "image height in pixels")
      ->check(whole_number(100, 20000))
      ->capture_default_str();
  cmd->callback([a] { run(*a); });
}

}  // namespace gdn::cli
