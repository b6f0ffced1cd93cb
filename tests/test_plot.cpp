// Loss plots: metrics.jsonl parsing (malformed lines skipped and counted, other records ignored,
// duplicate steps resolved to the later line, missing and empty files are errors), the EMA, nice
// axis ticks and labels, and the SVG itself: well-formed, one polyline per series, every point
// inside the plot area of axes whose ranges cover the data.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <sstream>

#include "src/core/error.h"
#include "src/train/plot.h"
#include "tests/test_helpers.h"

namespace gdn::train {
namespace {

using test::error_of;
using test::TempDir;
using test::write_file;

// A synthetic run: loss 10 * exp(-step / 300) + 2 with a wiggle, lr warmup then cosine, a
// validation record every 100 steps (steps 0..1000).
std::string synthetic_metrics() {
  std::ostringstream os;
  for (int s = 1; s <= 1000; ++s) {
    const double loss = 10 * std::exp(-s / 300.0) + 2 + 0.3 * std::sin(s * 0.7);
    const double lr = s < 100 ? 3e-4 * s / 100 : 1.5e-4 * (1 + std::cos(M_PI * (s - 100) / 900));
    os << "{\"step\": " << s << ", \"loss\": " << loss << ", \"lr\": " << lr
       << ", \"tokens_per_s\": 1234.5}\n";
    if (s % 100 == 0 || s == 1)
      os << "{\"step\": " << (s == 1 ? 0 : s)
         << ", \"val_loss\": " << 10 * std::exp(-s / 300.0) + 2.2 << "}\n";
  }
  return os.str();
}

// Checks that every tag is closed in order; returns "" or what is wrong.
std::string xml_balance_error(const std::string& svg) {
  std::vector<std::string> stack;
  size_t i = 0;
  while ((i = svg.find('<', i)) != std::string::npos) {
    const size_t end = svg.find('>', i);
    if (end == std::string::npos) return "unterminated tag at " + std::to_string(i);
    const std::string tag = svg.substr(i + 1, end - i - 1);
    i = end + 1;
    if (tag.empty()) return "empty tag";
    if (tag[0] == '?' || tag[0] == '!') continue;
    if (tag[0] == '/') {
      const std::string name = tag.substr(1);
      if (stack.empty() || stack.back() != name)
        return "</" + name + "> closes " + (stack.empty() ? "nothing" : "<" + stack.back() + ">");
      stack.pop_back();
      continue;
    }
    if (tag.back() == '/') continue;  // self-closing
    stack.push_back(tag.substr(0, tag.find_first_of(" \n\t")));
  }
  if (!stack.empty()) return "<" + stack.back() + "> never closed";
  // No raw '&' outside entities.
  for (size_t a = svg.find('&'); a != std::string::npos; a = svg.find('&', a + 1)) {
    bool entity = false;
    for (const char* e : {"&amp;", "&lt;", "&gt;", "&quot;", "&apos;"})
      entity = entity || svg.compare(a, std::strlen(e), e) == 0;
    if (!entity) return "raw & at " + std::to_string(a);
  }
  return "";
}

int count_of(const std::string& s, const std::string& needle) {
  int n = 0;
  for (size_t i = s.find(needle); i != std::string::npos; i = s.find(needle, i + 1)) ++n;
  return n;
}

// The points of every polyline.
std::vector<std::vector<std::pair<double, double>>> polylines(const std::string& svg) {
  std::vector<std::vector<std::pair<double, double>>> out;
  // std::regex is avoided: GCC 12 warns inside it under the sanitizer build.
  for (size_t at = svg.find("<polyline"); at != std::string::npos;
       at = svg.find("<polyline", at + 1)) {
    const size_t begin = svg.find(" points=\"", at) + 9, end = svg.find('"', begin);
    std::vector<std::pair<double, double>> pts;
    std::istringstream is(svg.substr(begin, end - begin));
    std::string xy;
    while (is >> xy) {
      const size_t comma = xy.find(',');
      pts.emplace_back(std::stod(xy.substr(0, comma)), std::stod(xy.substr(comma + 1)));
    }
    out.push_back(pts);
  }
  return out;
}

MetricsSeries parse(const std::string& text) {
  std::istringstream is(text);
  return parse_metrics(is);
}

void expect_points_inside(const std::string& svg, const PlotLayout& L) {
  for (const auto& line : polylines(svg)) {
    ASSERT_FALSE(line.empty());
    for (const auto& [x, y] : line) {
      EXPECT_GE(x, L.left - 0.06);
      EXPECT_LE(x, L.right + 0.06);
      EXPECT_GE(y, L.top - 0.06);
      EXPECT_LE(y, L.bottom + 0.06);
    }
  }
}

TEST(Plot, ParsesTrainValAndLr) {
  const MetricsSeries m = parse(synthetic_metrics());
  EXPECT_EQ(m.train_loss.size(), 1000u);
  EXPECT_EQ(m.lr.size(), 1000u);
  EXPECT_EQ(m.val_loss.size(), 11u);
  EXPECT_EQ(m.malformed, 0);
  EXPECT_EQ(m.lines, 1011);
  EXPECT_EQ(m.val_loss.front().step, 0);
  EXPECT_EQ(m.val_loss.back().step, 1000);
}

TEST(Plot, MalformedLinesAreSkippedAndCounted) {
  const std::string text =
      "{\"step\": 1, \"loss\": 5.0, \"lr\": 0.001}\n"
      "\n"                 // blank: not a line
      "not json at all\n"  // malformed
      "{\"step\": 2, \"loss\": 4.5}\n"
      "[1, 2, 3]\n"                                         // not an object
      "{\"step\": \"3\", \"loss\": 4.0}\n"                  // step of the wrong type
      "{\"step\": 4, \"skipped\": true, \"loss\": null}\n"  // a skipped step: counted apart
      "{\"step\": 4, \"loss\": \"nan\"}\n"                  // a loss of the wrong type
      "{\"loss\": 3.0}\n"                                   // no step
      "{\"event\": \"checkpoint\", \"step\": 4}\n"  // another record kind: ignored, not malformed
      "{\"step\": 5, \"val_loss\": 4.2}\n"
      "{\"step\": 6, \"loss\": 3.9, \"l";  // cut off by a crash
  const MetricsSeries m = parse(text);
  EXPECT_EQ(m.lines, 11);
  EXPECT_EQ(m.malformed, 6);
  EXPECT_EQ(m.non_finite, 1);
  ASSERT_EQ(m.train_loss.size(), 2u);
  EXPECT_EQ(m.train_loss[1].step, 2);
  EXPECT_EQ(m.train_loss[1].value, 4.5);
  ASSERT_EQ(m.val_loss.size(), 1u);
  EXPECT_EQ(m.val_loss[0].value, 4.2);
  EXPECT_EQ(m.lr.size(), 1u);
}

TEST(Plot, RepeatedStepsKeepTheLaterLine) {
  // A run resumed at step 2 after crashing at step 3 logs steps 2 and 3 again.
  const MetricsSeries m = parse(
      "{\"step\": 1, \"loss\": 5}\n{\"step\": 2, \"loss\": 4}\n{\"step\": 3, \"loss\": 3}\n"
      "{\"step\": 2, \"loss\": 4.1}\n{\"step\": 3, \"loss\": 3.1}\n{\"step\": 4, \"loss\": 2}\n");
  ASSERT_EQ(m.train_loss.size(), 4u);
  EXPECT_EQ(m.train_loss[1].value, 4.1);
  EXPECT_EQ(m.train_loss[2].value, 3.1);
  EXPECT_EQ(m.train_loss[3].step, 4);
}

TEST(Plot, MissingAndEmptyFilesAreErrors) {
  TempDir dir;
  const std::string missing = error_of([&] { read_metrics(dir.file("metrics.jsonl")); });
  EXPECT_NE(missing.find("no metrics file"), std::string::npos) << missing;
  EXPECT_NE(missing.find("metrics.jsonl"), std::string::npos);
  write_file(dir.file("metrics.jsonl"), "");
  const std::string empty = error_of([&] { read_metrics(dir.file("metrics.jsonl")); });
  EXPECT_NE(empty.find("has no training (loss) or validation (val_loss) records"),
            std::string::npos)
      << empty;
  write_file(dir.file("metrics.jsonl"), "garbage\n{\"event\": \"start\"}\n");
  const std::string useless = error_of([&] { read_metrics(dir.file("metrics.jsonl")); });
  EXPECT_NE(useless.find("(2 lines, 1 malformed)"), std::string::npos) << useless;
}

TEST(Plot, EmaSmoothing) {
  EXPECT_EQ(ema_smooth({1, 2, 3}, 1), (std::vector<double>{1, 2, 3}));
  const auto s = ema_smooth({4, 4, 4, 4}, 10);  // debiased: a constant stays constant
  for (double v : s) EXPECT_NEAR(v, 4, 1e-12);
  const auto r = ema_smooth({0, 10}, 3);  // alpha 0.5: (0.5 * 0.5 * 0 + 0.5 * 10) / 0.75
  EXPECT_NEAR(r[0], 0, 1e-12);
  EXPECT_NEAR(r[1], 5 / 0.75, 1e-12);
}

// On a ramp the plain EMA trails by (1 - alpha) / alpha points; the centred one, a symmetric
// kernel, sits on the ramp away from the ends (both ends debiased, a constant stays constant).
TEST(Plot, CentredSmoothingDoesNotLag) {
  std::vector<double> ramp;
  for (int i = 0; i < 400; ++i) ramp.push_back(i);
  const double alpha = 2.0 / (9 + 1);
  EXPECT_NEAR(ema_smooth(ramp, 9)[200], 200 - (1 - alpha) / alpha, 1e-6);
  EXPECT_NEAR(centred_ema_smooth(ramp, 9)[200], 200, 1e-6);
  for (double v : centred_ema_smooth({4, 4, 4, 4}, 10)) EXPECT_NEAR(v, 4, 1e-12);
  EXPECT_EQ(centred_ema_smooth({1, 2, 3}, 1), (std::vector<double>{1, 2, 3}));
}

// --metrics: one panel per metric, stacked, each a whole plot; any numeric field can be drawn.
TEST(Plot, MetricPanelsStackAndUnknownMetricsAreNamed) {
  MetricsSeries m = parse(synthetic_metrics());
  EXPECT_EQ(m.scalars.count("loss"), 1u);
  EXPECT_EQ(m.scalars.at("lr").size(), m.lr.size());
  PlotOptions o;
  o.title = "run";
  const std::string svg = render_metrics_svg(m, {"loss", "lr"}, o);
  EXPECT_EQ(xml_balance_error(svg), "");
  EXPECT_NE(svg.find("height=\"1080\""), std::string::npos);
  EXPECT_NE(svg.find("<svg x=\"0\" y=\"540\""), std::string::npos);
  EXPECT_NE(svg.find(">run: lr<"), std::string::npos);
  EXPECT_EQ(count_of(svg, "series-train-ema\""), 2);
  const std::string e = error_of([&] { render_metrics_svg(m, {"grad_nrom"}, o); });
  EXPECT_NE(e.find("the metrics have no 'grad_nrom' (they have: "), std::string::npos) << e;
}

TEST(Plot, NiceTicksAndLabels) {
  Axis a = linear_axis(2.13, 11.7);
  EXPECT_LE(a.lo, 2.13);
  EXPECT_GE(a.hi, 11.7);
  EXPECT_EQ(a.ticks.front(), a.lo);
  EXPECT_EQ(a.ticks.back(), a.hi);
  EXPECT_GE(a.ticks.size(), 4u);
  EXPECT_LE(a.ticks.size(), 12u);
  const double spacing = a.ticks[1] - a.ticks[0];
  const double mantissa = spacing / std::pow(10.0, std::floor(std::log10(spacing)));
  EXPECT_TRUE(std::abs(mantissa - 1) < 1e-9 || std::abs(mantissa - 2) < 1e-9 ||
              std::abs(mantissa - 5) < 1e-9)
      << spacing;
  Axis flat = linear_axis(3, 3);  // a single value still gets a range
  EXPECT_LT(flat.lo, 3);
  EXPECT_GT(flat.hi, 3);
  Axis lg = log_axis(3, 2500);
  EXPECT_TRUE(lg.log);
  EXPECT_EQ(lg.lo, 1);
  EXPECT_EQ(lg.hi, 5000) << "the first 1, 2 or 5 x 10^k above the data";
  EXPECT_EQ(lg.ticks, (std::vector<double>{1, 10, 100, 1000, 5000}));
  EXPECT_EQ(log_axis(3, 400).ticks, (std::vector<double>{1, 2, 5, 10, 20, 50, 100, 200, 500}));
  EXPECT_EQ(log_axis(10, 10).hi, 20);
  EXPECT_EQ(format_tick(0.30000000000000004, 0.1), "0.3");
  EXPECT_EQ(format_tick(2.5, 0.5), "2.5");
  EXPECT_EQ(format_tick(1500, 500), "1500");
  EXPECT_EQ(format_tick(20000, 5000), "20k");
  EXPECT_EQ(format_tick(2500000, 500000), "2.5M");
  EXPECT_EQ(format_tick(0.00025, 0.00005), "0.00025");
  EXPECT_EQ(format_tick(-1e-17, 0.1), "0");
}

TEST(Plot, SvgIsWellFormedWithOnePolylinePerSeries) {
  const MetricsSeries m = parse(synthetic_metrics());
  PlotOptions o;
  o.title = "tiny <run> & co";
  PlotLayout L;
  const std::string svg = render_loss_svg(m, o, &L);
  EXPECT_EQ(xml_balance_error(svg), "");
  EXPECT_EQ(svg.rfind("<?xml", 0), 0u);
  EXPECT_NE(svg.find("tiny &lt;run&gt; &amp; co"), std::string::npos) << "title escaped";
  // Series: lr, train raw, train EMA, val.
  EXPECT_EQ(L.series, 4);
  EXPECT_EQ(count_of(svg, "<polyline"), 4);
  for (const char* cls : {"series-train\"", "series-train-ema\"", "series-val\"", "series-lr\""})
    EXPECT_EQ(count_of(svg, cls), 1) << cls;
  EXPECT_EQ(count_of(svg, "<circle"), 11 + 1) << "a marker per val point, one in the legend";
  for (const char* label : {">train loss<", ">train loss (centred EMA 20)<", ">val loss<",
                            ">learning rate<", ">step<", ">loss<"})
    EXPECT_NE(svg.find(label), std::string::npos) << label;

  // Axis ranges cover the data, and every drawn point lies in the plot area.
  EXPECT_TRUE(L.has_lr);
  EXPECT_LE(L.x.lo, 0);
  EXPECT_GE(L.x.hi, 1000);
  double lo = INFINITY, hi = -INFINITY, lr_hi = 0;
  for (const auto* s : {&m.train_loss, &m.val_loss})
    for (const auto& p : *s) lo = std::min(lo, p.value), hi = std::max(hi, p.value);
  for (const auto& p : m.lr) lr_hi = std::max(lr_hi, p.value);
  EXPECT_LE(L.y.lo, lo);
  EXPECT_GE(L.y.hi, hi);
  EXPECT_LE(L.lr.lo, 0);
  EXPECT_GE(L.lr.hi, lr_hi);
  expect_points_inside(svg, L);
  // The tick labels are nice numbers of the axes.
  EXPECT_NE(svg.find(">1000</text>"), std::string::npos);
  EXPECT_NE(svg.find(">0.0003</text>"), std::string::npos);
}

TEST(Plot, OptionsChangeTheSeries) {
  const MetricsSeries m = parse(synthetic_metrics());
  PlotOptions o;
  o.show_lr = false;
  o.smooth = 0;
  PlotLayout L;
  std::string svg = render_loss_svg(m, o, &L);
  EXPECT_EQ(xml_balance_error(svg), "");
  EXPECT_EQ(L.series, 2);
  EXPECT_EQ(count_of(svg, "<polyline"), 2);
  EXPECT_EQ(svg.find("series-lr"), std::string::npos);

  // Only validation records, log x: step 0 is dropped, everything else inside.
  MetricsSeries val_only = m;
  val_only.train_loss.clear();
  val_only.lr.clear();
  o = {};
  o.log_x = true;
  svg = render_loss_svg(val_only, o, &L);
  EXPECT_EQ(xml_balance_error(svg), "");
  EXPECT_EQ(L.series, 1);
  EXPECT_EQ(L.dropped, 1);
  EXPECT_TRUE(L.x.log);
  EXPECT_LE(L.x.lo, 100);
  EXPECT_GE(L.x.hi, 1000);
  expect_points_inside(svg, L);

  // A single training point still makes a plot.
  svg = render_loss_svg(parse("{\"step\": 7, \"loss\": 3.5}\n"), PlotOptions{}, &L);
  EXPECT_EQ(xml_balance_error(svg), "");
  EXPECT_LT(L.x.lo, 7);
  EXPECT_GT(L.x.hi, 7);
  expect_points_inside(svg, L);

  // Nothing with step > 0 on a log axis is an error, not an empty picture.
  o = {};
  o.log_x = true;
  EXPECT_NE(error_of([&] {
              render_loss_svg(parse("{\"step\": 0, \"val_loss\": 3}\n"), o);
            }).find("no training or validation points"),
            std::string::npos);
}

TEST(Plot, LongRunsAreThinnedButKeepSpikes) {
  std::ostringstream os;
  for (int s = 1; s <= 50000; ++s)
    os << "{\"step\": " << s << ", \"loss\": " << (s == 25000 ? 9.0 : 3.0) << "}\n";
  const MetricsSeries m = parse(os.str());
  PlotLayout L;
  PlotOptions o;
  o.smooth = 0;
  const std::string svg = render_loss_svg(m, o, &L);
  const auto lines = polylines(svg);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_LE(lines[0].size(), size_t(2 * (L.right - L.left) + 2));
  double top = INFINITY;
  for (const auto& p : lines[0]) top = std::min(top, p.second);
  EXPECT_NEAR(top, L.top + (L.y.hi - 9.0) / (L.y.hi - L.y.lo) * (L.bottom - L.top), 0.06)
      << "the spike at step 25000 survives";
}

TEST(Plot, RunName) {
  EXPECT_EQ(run_name("runs/tiny"), "tiny");
  EXPECT_EQ(run_name("runs/tiny/"), "tiny");
  EXPECT_EQ(run_name("/abs/path/run-3/./"), "run-3");
  EXPECT_FALSE(run_name(".").empty());
}

}  // namespace
}  // namespace gdn::train
