// Metrics parsing and the SVG renderer. The SVG is written by hand: a few rects, lines,
// polylines and texts, every element self-closing or closed on its line, so the output is
// well-formed XML by construction and easy to diff. render_loss_svg takes named steps: the
// visible series, the axes and plot area, then header, axes, series and legend in SVG order.
#include "src/train/plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "src/core/error.h"

namespace gdn::train {

namespace {

namespace fs = std::filesystem;

// Sorted by step; of points with the same step the last in file order stays.
void sort_unique_by_step(std::vector<SeriesPoint>& s) {
  std::stable_sort(s.begin(), s.end(),
                   [](const SeriesPoint& a, const SeriesPoint& b) { return a.step < b.step; });
  std::vector<SeriesPoint> out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i)
    if (i + 1 == s.size() || s[i + 1].step != s[i].step) out.push_back(s[i]);
  s = std::move(out);
}

enum class Field { absent, null, number, bad };

// The finite number under `key`. null is how nlohmann writes NaN and inf, and how the trainer
// logs the loss of a skipped step: a known record, not a malformed one.
Field number_field(const nlohmann::json& j, const char* key, double& out) {
  auto it = j.find(key);
  if (it == j.end()) return Field::absent;
  if (it->is_null()) return Field::null;
  if (!it->is_number() || !std::isfinite(it->get<double>())) return Field::bad;
  out = it->get<double>();
  return Field::number;
}

std::string xml_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

// 1, 2, 5 or 10 x 10^k near x: rounded (tick spacing) or the next one up (range).
double nice_number(double x, bool round) {
  const double e = std::floor(std::log10(x));
  const double f = x / std::pow(10.0, e);
  double nf;
  if (round) {
    nf = f < 1.5 ? 1 : f < 3 ? 2 : f < 7 ? 5 : 10;
  } else {
    nf = f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10;
  }
  return nf * std::pow(10.0, e);
}

std::string fmt(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

// Pixel coordinates of value v on an axis drawn from p0 (at lo) to p1 (at hi).
double to_pixel(const Axis& a, double v, double p0, double p1) {
  const double t = a.log
                       ? (std::log10(v) - std::log10(a.lo)) / (std::log10(a.hi) - std::log10(a.lo))
                       : (v - a.lo) / (a.hi - a.lo);
  return p0 + t * (p1 - p0);
}

struct Pixel {
  double x, y;
};

// Keeps a long series drawable: with more than two points per pixel column, each column keeps
// its lowest and highest point (in x order), so spikes survive the thinning.
std::vector<Pixel> thin(const std::vector<Pixel>& pts, double width) {
  if (double(pts.size()) <= 2 * width) return pts;
  std::vector<Pixel> out;
  size_t i = 0;
  while (i < pts.size()) {
    const double column = std::floor(pts[i].x);
    size_t lo = i, hi = i, j = i;
    for (; j < pts.size() && std::floor(pts[j].x) == column; ++j) {
      if (pts[j].y < pts[lo].y) lo = j;
      if (pts[j].y > pts[hi].y) hi = j;
    }
    out.push_back(pts[std::min(lo, hi)]);
    if (lo != hi) out.push_back(pts[std::max(lo, hi)]);
    i = j;
  }
  return out;
}

std::string points_attr(const std::vector<Pixel>& pts) {
  std::string s;
  s.reserve(pts.size() * 14);
  for (const Pixel& p : pts) {
    if (!s.empty()) s += ' ';
    s += fmt("%.1f", p.x) + "," + fmt("%.1f", p.y);
  }
  return s;
}

// ---- render_loss_svg's steps ----------------------------------------------------------------

// What a plot draws: the points on its x axis (a log axis has no place for steps <= 0), the
// training loss raw and smoothed, and the top of the learning rate.
struct PlotSeries {
  std::vector<SeriesPoint> train, val, lr;
  std::vector<double> raw, ema;
  bool smoothed = false;
  double lr_max = 0;
};

PlotSeries plot_series(const MetricsSeries& m, const PlotOptions& o, PlotLayout& L) {
  // On a log axis, steps <= 0 have no place: drop them and say how many.
  auto visible = [&](const std::vector<SeriesPoint>& s) {
    std::vector<SeriesPoint> out;
    for (const SeriesPoint& p : s) {
      if (o.log_x && p.step <= 0) {
        ++L.dropped;
        continue;
      }
      out.push_back(p);
    }
    return out;
  };
  PlotSeries s;
  s.train = visible(m.train_loss);
  s.val = visible(m.val_loss);
  if (o.show_lr) s.lr = visible(m.lr);
  GDN_CHECK(!s.train.empty() || !s.val.empty(), "plot: no training or validation points to draw",
            o.log_x ? " (a log x axis leaves out steps <= 0)" : "");
  for (const SeriesPoint& p : s.train) s.raw.push_back(p.value);
  s.smoothed = o.smooth > 1 && !s.train.empty();
  if (s.smoothed) s.ema = centred_ema_smooth(s.raw, o.smooth);
  for (const SeriesPoint& p : s.lr) s.lr_max = std::max(s.lr_max, p.value);
  L.has_lr = !s.lr.empty() && s.lr_max > 0;
  return s;
}

// The axes' ranges over everything drawn, and the plot area in pixels.
void place_axes(const PlotSeries& s, const PlotOptions& o, PlotLayout& L) {
  double x_lo = INFINITY, x_hi = -INFINITY, y_lo = INFINITY, y_hi = -INFINITY;
  for (const auto* series : {&s.train, &s.val, &s.lr})
    for (const SeriesPoint& p : *series) {
      if (series == &s.lr && !L.has_lr) continue;
      x_lo = std::min(x_lo, p.step);
      x_hi = std::max(x_hi, p.step);
    }
  for (const auto* series : {&s.train, &s.val})
    for (const SeriesPoint& p : *series) {
      y_lo = std::min(y_lo, p.value);
      y_hi = std::max(y_hi, p.value);
    }
  L.x = o.log_x ? log_axis(x_lo, x_hi) : linear_axis(x_lo, x_hi);
  L.y = linear_axis(y_lo, y_hi);
  if (L.has_lr) L.lr = linear_axis(0, s.lr_max, 6);
  L.left = 80;
  L.right = o.width - (L.has_lr ? 85.0 : 30.0);
  L.top = 50;
  L.bottom = o.height - 60;
}

// Pixel positions in the plot area of a layout.
struct Projection {
  const PlotLayout& L;
  double x(double step) const { return to_pixel(L.x, step, L.left, L.right); }
  double y(double v) const { return to_pixel(L.y, v, L.bottom, L.top); }
  double lr(double v) const { return to_pixel(L.lr, v, L.bottom, L.top); }
};

double tick_spacing(const Axis& a) {
  return a.ticks.size() > 1 ? a.ticks[1] - a.ticks[0] : 1;
}

void write_header(std::ostream& svg, const PlotOptions& o) {
  svg << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << o.width << "\" height=\""
      << o.height << "\" viewBox=\"0 0 " << o.width << " " << o.height
      << "\" font-family=\"sans-serif\" font-size=\"12\">\n"
      << "<rect x=\"0\" y=\"0\" width=\"" << o.width << "\" height=\"" << o.height
      << "\" fill=\"white\"/>\n"
      << "<text x=\"" << o.width / 2 << "\" y=\"28\" text-anchor=\"middle\" font-size=\"16\">"
      << xml_escape(o.title) << "</text>\n";
}

void write_grid(std::ostream& svg, const PlotLayout& L) {
  const Projection P{L};
  svg << "<g class=\"grid\" stroke=\"#e0e0e0\" stroke-width=\"1\">\n";
  for (double t : L.x.ticks)
    svg << "<line x1=\"" << fmt("%.1f", P.x(t)) << "\" y1=\"" << L.top << "\" x2=\""
        << fmt("%.1f", P.x(t)) << "\" y2=\"" << L.bottom << "\"/>\n";
  for (double t : L.y.ticks)
    svg << "<line x1=\"" << L.left << "\" y1=\"" << fmt("%.1f", P.y(t)) << "\" x2=\"" << L.right
        << "\" y2=\"" << fmt("%.1f", P.y(t)) << "\"/>\n";
  svg << "</g>\n";
}

void write_x_axis(std::ostream& svg, const PlotLayout& L, const PlotOptions& o) {
  const Projection P{L};
  const double spacing = tick_spacing(L.x);
  svg << "<g class=\"x-axis\" data-lo=\"" << L.x.lo << "\" data-hi=\"" << L.x.hi << "\">\n";
  for (double t : L.x.ticks) {
    // A log axis labels its decades; 2 and 5 x 10^k get a tick and a smaller label.
    svg << "<line x1=\"" << fmt("%.1f", P.x(t)) << "\" y1=\"" << L.bottom << "\" x2=\""
        << fmt("%.1f", P.x(t)) << "\" y2=\"" << L.bottom + 5 << "\" stroke=\"black\"/>\n"
        << "<text x=\"" << fmt("%.1f", P.x(t)) << "\" y=\"" << L.bottom + 19
        << "\" text-anchor=\"middle\">" << format_tick(t, L.x.log ? t : spacing) << "</text>\n";
  }
  svg << "<text x=\"" << (L.left + L.right) / 2 << "\" y=\"" << o.height - 18
      << "\" text-anchor=\"middle\">step" << (L.x.log ? " (log scale)" : "") << "</text>\n</g>\n";
}

// A vertical axis on one side of the plot area, drawn from its bottom (lo) to its top (hi): the
// loss on the left, the learning rate on the right. Ticks and labels point away from the plot;
// the title reads upwards on the left, downwards on the right.
struct SideAxis {
  const char* cls;
  const Axis& axis;
  double edge;             // x of the plot area's side
  int outward;             // -1: left, +1: right
  const char* color;       // of the ticks
  const char* group_fill;  // "": none
  int title_x;
  const char* title;
};

void write_side_axis(std::ostream& svg, const PlotLayout& L, const SideAxis& a) {
  const double spacing = tick_spacing(a.axis);
  const double tick_end = a.edge + 5 * a.outward, label_x = a.edge + 8 * a.outward;
  svg << "<g class=\"" << a.cls << "\" data-lo=\"" << a.axis.lo << "\" data-hi=\"" << a.axis.hi
      << "\"" << (*a.group_fill ? std::string(" fill=\"") + a.group_fill + "\"" : "") << ">\n";
  for (double t : a.axis.ticks) {
    const double y = to_pixel(a.axis, t, L.bottom, L.top);
    svg << "<line x1=\"" << std::min(a.edge, tick_end) << "\" y1=\"" << fmt("%.1f", y) << "\" x2=\""
        << std::max(a.edge, tick_end) << "\" y2=\"" << fmt("%.1f", y) << "\" stroke=\"" << a.color
        << "\"/>\n"
        << "<text x=\"" << label_x << "\" y=\"" << fmt("%.1f", y + 4) << "\" text-anchor=\""
        << (a.outward < 0 ? "end" : "start") << "\">" << format_tick(t, spacing) << "</text>\n";
  }
  svg << "<text transform=\"translate(" << a.title_x << " " << (L.top + L.bottom) / 2 << ") rotate("
      << 90 * a.outward << ")\" text-anchor=\"middle\">" << a.title << "</text>\n</g>\n";
}

// Grid, axes with their ticks and labels, and the frame of the plot area.
void write_axes(std::ostream& svg, const PlotLayout& L, const PlotOptions& o) {
  write_grid(svg, L);
  write_x_axis(svg, L, o);
  write_side_axis(svg, L, {"y-axis", L.y, L.left, -1, "black", "", 22, o.metric.c_str()});
  if (L.has_lr)
    write_side_axis(
        svg, L,
        {"lr-axis", L.lr, L.right, +1, "#2ca02c", "#2ca02c", o.width - 14, "learning rate"});
  svg << "<rect class=\"frame\" x=\"" << L.left << "\" y=\"" << L.top << "\" width=\""
      << L.right - L.left << "\" height=\"" << L.bottom - L.top
      << "\" fill=\"none\" stroke=\"black\"/>\n";
}

// How a series is drawn and named in the legend.
struct SeriesStyle {
  std::string label, color, dash;
  double width, opacity;
  bool marker;
};

// The series, one polyline each (validation markers too); returns the legend's entries.
std::vector<SeriesStyle> write_series(std::ostream& svg, const PlotSeries& s, const PlotOptions& o,
                                      PlotLayout& L) {
  const Projection P{L};
  std::vector<SeriesStyle> legend;
  auto polyline = [&](const char* cls, const std::vector<Pixel>& pts, const SeriesStyle& style) {
    svg << "<polyline class=\"" << cls << "\" fill=\"none\" stroke=\"" << style.color
        << "\" stroke-width=\"" << style.width << "\" stroke-opacity=\"" << style.opacity << "\""
        << (style.dash.empty() ? "" : " stroke-dasharray=\"" + style.dash + "\"") << " points=\""
        << points_attr(thin(pts, L.right - L.left)) << "\"/>\n";
    ++L.series;
    legend.push_back(style);
  };
  if (L.has_lr) {
    std::vector<Pixel> pts;
    for (const SeriesPoint& p : s.lr) pts.push_back({P.x(p.step), P.lr(p.value)});
    polyline("series-lr", pts, {"learning rate", "#2ca02c", "6 4", 1.5, 0.8, false});
  }
  if (!s.train.empty()) {
    std::vector<Pixel> pts;
    for (size_t i = 0; i < s.train.size(); ++i)
      pts.push_back({P.x(s.train[i].step), P.y(s.raw[i])});
    const std::string name = o.metric == "loss" ? "train loss" : o.metric;
    polyline("series-train", pts, {name, "#1f77b4", "", 1, s.smoothed ? 0.35 : 1.0, false});
  }
  if (s.smoothed) {
    std::vector<Pixel> pts;
    for (size_t i = 0; i < s.train.size(); ++i)
      pts.push_back({P.x(s.train[i].step), P.y(s.ema[i])});
    polyline("series-train-ema", pts,
             {(o.metric == "loss" ? "train loss" : o.metric) + " (centred EMA " +
                  fmt("%g", o.smooth) + ")",
              "#1f77b4", "", 2, 1.0, false});
  }
  if (!s.val.empty()) {
    std::vector<Pixel> pts;
    for (const SeriesPoint& p : s.val) pts.push_back({P.x(p.step), P.y(p.value)});
    polyline("series-val", pts, {"val loss", "#d62728", "", 1.5, 1.0, true});
    if (s.val.size() <= 300) {  // beyond that the markers are a smear
      svg << "<g class=\"markers-val\" fill=\"#d62728\">\n";
      for (const Pixel& p : pts)
        svg << "<circle cx=\"" << fmt("%.1f", p.x) << "\" cy=\"" << fmt("%.1f", p.y)
            << "\" r=\"3\"/>\n";
      svg << "</g>\n";
    }
  }
  return legend;
}

// The legend, top right inside the plot area.
void write_legend(std::ostream& svg, const std::vector<SeriesStyle>& legend, const PlotLayout& L) {
  const double lw = 190, lh = 10 + 18 * double(legend.size());
  const double lx = L.right - lw - 10, ly = L.top + 10;
  svg << "<g class=\"legend\">\n<rect x=\"" << lx << "\" y=\"" << ly << "\" width=\"" << lw
      << "\" height=\"" << lh << "\" fill=\"white\" fill-opacity=\"0.85\" stroke=\"#999999\"/>\n";
  for (size_t i = 0; i < legend.size(); ++i) {
    const SeriesStyle& e = legend[i];
    const double y = ly + 14 + 18 * double(i);
    svg << "<line x1=\"" << lx + 8 << "\" y1=\"" << y << "\" x2=\"" << lx + 36 << "\" y2=\"" << y
        << "\" stroke=\"" << e.color << "\" stroke-width=\"2\" stroke-opacity=\"" << e.opacity
        << "\"" << (e.dash.empty() ? "" : " stroke-dasharray=\"" + e.dash + "\"") << "/>\n";
    if (e.marker)
      svg << "<circle cx=\"" << lx + 22 << "\" cy=\"" << y << "\" r=\"3\" fill=\"" << e.color
          << "\"/>\n";
    svg << "<text x=\"" << lx + 44 << "\" y=\"" << y + 4 << "\">" << xml_escape(e.label)
        << "</text>\n";
  }
  svg << "</g>\n";
}

}  // namespace

MetricsSeries parse_metrics(std::istream& in) {
  MetricsSeries m;
  std::string line;
  while (std::getline(in, line)) {
    const auto first = line.find_first_not_of(" \t\r");
    if (first == std::string::npos) continue;
    ++m.lines;
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object()) {
      ++m.malformed;
      continue;
    }
    double step = 0, loss = 0, val_loss = 0, lr = 0;
    const Field f_step = number_field(j, "step", step);
    const Field f_loss = number_field(j, "loss", loss);
    const Field f_val = number_field(j, "val_loss", val_loss);
    const Field f_lr = number_field(j, "lr", lr);
    const bool bad =
        f_step == Field::bad || f_loss == Field::bad || f_val == Field::bad || f_lr == Field::bad;
    const bool any = f_loss != Field::absent || f_val != Field::absent || f_lr != Field::absent;
    if (bad || (any && f_step != Field::number)) {
      ++m.malformed;
      continue;
    }
    if (f_loss == Field::null || f_val == Field::null) ++m.non_finite;
    if (f_loss == Field::number) m.train_loss.push_back({step, loss});
    if (f_val == Field::number) m.val_loss.push_back({step, val_loss});
    if (f_lr == Field::number) m.lr.push_back({step, lr});
    if (f_step == Field::number)
      for (const auto& [key, value] : j.items())
        if (key != "step" && value.is_number() && std::isfinite(value.get<double>()))
          m.scalars[key].push_back({step, value.get<double>()});
  }
  for (auto& [key, series] : m.scalars) sort_unique_by_step(series);
  sort_unique_by_step(m.train_loss);
  sort_unique_by_step(m.val_loss);
  sort_unique_by_step(m.lr);
  return m;
}

MetricsSeries read_metrics(const std::string& path) {
  std::error_code ec;
  GDN_CHECK(fs::is_regular_file(path, ec), "no metrics file '", path,
            "' (is its directory a training run?)");
  std::ifstream f(path);
  GDN_CHECK(f, "cannot read the metrics file '", path, "'");
  MetricsSeries m = parse_metrics(f);
  GDN_CHECK(!m.train_loss.empty() || !m.val_loss.empty(), "metrics file '", path,
            "' has no training (loss) or validation (val_loss) records (", m.lines, " lines, ",
            m.malformed, " malformed)");
  return m;
}

std::vector<double> ema_smooth(const std::vector<double>& values, double span) {
  if (span <= 1) return values;
  const double alpha = 2.0 / (span + 1.0);
  std::vector<double> out(values.size());
  double avg = 0, weight = 0;  // weight = 1 - (1 - alpha)^t: removes the bias of avg's 0 start
  for (size_t i = 0; i < values.size(); ++i) {
    avg = (1 - alpha) * avg + alpha * values[i];
    weight = (1 - alpha) * weight + alpha;
    out[i] = avg / weight;
  }
  return out;
}

std::vector<double> centred_ema_smooth(const std::vector<double>& values, double span) {
  if (span <= 1) return values;
  const std::vector<double> forward = ema_smooth(values, span);
  std::vector<double> reversed(values.rbegin(), values.rend());
  const std::vector<double> backward = ema_smooth(reversed, span);
  std::vector<double> out(values.size());
  for (size_t i = 0; i < values.size(); ++i)
    out[i] = 0.5 * (forward[i] + backward[values.size() - 1 - i]);
  return out;
}

Axis linear_axis(double lo, double hi, int max_ticks) {
  GDN_CHECK(std::isfinite(lo) && std::isfinite(hi) && lo <= hi && max_ticks >= 2,
            "linear_axis: bad range [", lo, ", ", hi, "] or max_ticks ", max_ticks);
  if (hi == lo) {
    const double pad = lo != 0 ? std::abs(lo) * 0.1 : 1.0;
    lo -= pad;
    hi += pad;
  }
  const double spacing = nice_number(nice_number(hi - lo, false) / (max_ticks - 1), true);
  Axis a;
  a.lo = std::floor(lo / spacing) * spacing;
  a.hi = std::ceil(hi / spacing) * spacing;
  const int64_t n = int64_t(std::llround((a.hi - a.lo) / spacing));
  for (int64_t i = 0; i <= n; ++i) a.ticks.push_back(a.lo + double(i) * spacing);
  return a;
}

Axis log_axis(double lo, double hi) {
  GDN_CHECK(std::isfinite(lo) && std::isfinite(hi) && lo > 0 && lo <= hi, "log_axis: bad range [",
            lo, ", ", hi, "]");
  const int e0 = int(std::floor(std::log10(lo) + 1e-12));
  Axis a;
  a.log = true;
  a.lo = std::pow(10.0, e0);
  // The top is the first 1, 2 or 5 x 10^k at or above hi: a run of 3000 steps ends at 5000,
  // not 10000, so the last decade is not mostly empty.
  a.hi = a.lo * 10;
  for (int e = e0;; ++e) {
    const double d = std::pow(10.0, e);
    const double cand[] = {2 * d, 5 * d, 10 * d};
    bool found = false;
    for (double c : cand)
      if (c >= hi * (1 - 1e-12)) {
        a.hi = c;
        found = true;
        break;
      }
    if (found) break;
  }
  const int decades = int(std::ceil(std::log10(a.hi / a.lo) - 1e-12));
  const bool few = std::log10(a.hi / a.lo) <= 3 + 1e-9;  // else label the decades only
  for (int e = e0; e <= e0 + decades; ++e) {
    const double d = std::pow(10.0, e);
    for (double m : {1.0, 2.0, 5.0}) {
      if (m != 1.0 && !few) continue;
      if (m * d <= a.hi * (1 + 1e-12)) a.ticks.push_back(m * d);
    }
  }
  if (a.ticks.back() < a.hi * (1 - 1e-12)) a.ticks.push_back(a.hi);
  return a;
}

std::string format_tick(double value, double spacing) {
  if (spacing > 0) value = std::round(value / spacing) * spacing;  // 0.30000000004 -> 0.3
  if (std::abs(value) < 1e-12 * std::max(1.0, std::abs(spacing))) return "0";
  const double a = std::abs(value);
  if (a >= 1e6 && std::fmod(a, 1e5) == 0) return fmt("%gM", value / 1e6);
  if (a >= 1e4 && std::fmod(a, 100) == 0) return fmt("%gk", value / 1e3);
  if (spacing >= 1 && a < 1e15) return fmt("%.0f", value);
  if (spacing >= 1e-3) {
    const int decimals = std::max(0, int(std::ceil(-std::log10(spacing) - 1e-9)));
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.*f", decimals, value);
    return buf;
  }
  if (spacing <= 0) return fmt("%g", value);
  // Tiny spacings (learning rates): as many significant digits as the spacing resolves.
  const int digits =
      std::max(1, int(std::floor(std::log10(a)) - std::floor(std::log10(spacing))) + 1);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*g", digits, value);
  return buf;
}

std::string run_name(const std::string& run_dir) {
  fs::path p = fs::path(run_dir).lexically_normal();
  if (p.filename().empty()) p = p.parent_path();  // "runs/tiny/"
  if (p.empty() || p == "." || p == "..") {
    std::error_code ec;
    const fs::path abs = fs::weakly_canonical(fs::absolute(run_dir), ec);
    if (!ec && !abs.filename().empty()) return abs.filename().string();
  }
  return p.filename().string();
}

std::string render_loss_svg(const MetricsSeries& m, const PlotOptions& o, PlotLayout* layout_out) {
  GDN_CHECK(o.width >= 200 && o.height >= 150, "plot: size ", o.width, " x ", o.height,
            " is too small (>= 200 x 150)");
  PlotLayout L;
  const PlotSeries s = plot_series(m, o, L);
  place_axes(s, o, L);
  std::ostringstream svg;
  write_header(svg, o);
  write_axes(svg, L, o);
  const std::vector<SeriesStyle> legend = write_series(svg, s, o, L);
  write_legend(svg, legend, L);
  svg << "</svg>\n";
  if (layout_out) *layout_out = L;
  return svg.str();
}

std::string render_metrics_svg(const MetricsSeries& m, const std::vector<std::string>& names,
                               const PlotOptions& o) {
  GDN_CHECK(!names.empty(), "plot: no metric to draw");
  std::ostringstream svg;
  const int height = o.height * int(names.size());
  svg << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << o.width << "\" height=\"" << height
      << "\" viewBox=\"0 0 " << o.width << " " << height << "\">\n";
  for (size_t i = 0; i < names.size(); ++i) {
    PlotOptions panel = o;
    panel.metric = names[i];
    std::string one;
    if (names[i] == "loss") {
      one = render_loss_svg(m, panel);
    } else {
      const auto it = m.scalars.find(names[i]);
      if (it == m.scalars.end()) {
        std::vector<std::string> known;
        for (const auto& [key, series] : m.scalars) known.push_back(key);
        GDN_FAIL("plot: the metrics have no '", names[i], "' (they have: ", join(known, ", "), ")");
      }
      MetricsSeries only;
      only.train_loss = it->second;
      panel.show_lr = false;
      panel.title = o.title + ": " + names[i];
      one = render_loss_svg(only, panel);
    }
    // Each panel is a whole SVG: nested at its offset, without its XML declaration.
    one.erase(0, one.find("<svg"));
    svg << "<svg x=\"0\" y=\"" << o.height * int(i) << "\"" << one.substr(4);
  }
  svg << "</svg>\n";
  return svg.str();
}

}  // namespace gdn::train
