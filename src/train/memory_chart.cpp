// Rendering the timeline: plain SVG text (no library), drawn back to front: phase bands, grid,
// stacked areas, layer lines, peak and budget marks, axes, legend, then the invisible hover
// columns on top so that every tooltip is reachable.
#include "src/train/memory_chart.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "src/core/error.h"

namespace gdn::train {

const std::array<MemCategory, kNumMemCategories> kChartStack = {
    MemCategory::param,      MemCategory::optim, MemCategory::grad,
    MemCategory::activation, MemCategory::temp,  MemCategory::workspace};

namespace {

constexpr double kSvgWidth = 1600, kSvgHeight = 900;
// The SVG's ops narrower than this share a tooltip (keeping the file small); the HTML page, which
// zooms, has one per op.
constexpr double kSvgHoverPx = 4;
const char* kFont = "DejaVu Sans, Helvetica, Arial, sans-serif";

const char* category_color(MemCategory c) {
  switch (c) {
    case MemCategory::param:
      return "#4e79a7";
    case MemCategory::optim:
      return "#b07aa1";
    case MemCategory::grad:
      return "#f28e2b";
    case MemCategory::activation:
      return "#59a14f";
    case MemCategory::temp:
      return "#bab0ac";
    case MemCategory::workspace:
      return "#76b7b2";
  }
  return "#999";
}

const char* phase_color(const std::string& phase) {
  if (phase == "forward") return "#e3eefa";
  if (phase == "backward") return "#fbeadb";
  if (phase == "optimizer") return "#e2f2df";
  return "#eeeeee";
}

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '&')
      out += "&amp;";
    else if (c == '<')
      out += "&lt;";
    else if (c == '>')
      out += "&gt;";
    else if (c == '"')
      out += "&quot;";
    else
      out += c;
  }
  return out;
}

std::string text(double x, double y, const std::string& s, const std::string& attrs = "") {
  return str_cat("<text x=\"", svg_number(x), "\" y=\"", svg_number(y), "\"",
                 attrs.empty() ? "" : " ", attrs, ">", escape(s), "</text>\n");
}

std::string line(double x1, double y1, double x2, double y2, const std::string& attrs) {
  return str_cat("<line x1=\"", svg_number(x1), "\" y1=\"", svg_number(y1), "\" x2=\"",
                 svg_number(x2), "\" y2=\"", svg_number(y2), "\" ", attrs, "/>\n");
}

std::string rect(double x, double y, double w, double h, const std::string& attrs) {
  return str_cat("<rect x=\"", svg_number(x), "\" y=\"", svg_number(y), "\" width=\"",
                 svg_number(w), "\" height=\"", svg_number(h), "\" ", attrs, "/>\n");
}

// 1, 2, 2.5 or 5 times a power of ten: about `target` of them span `range`.
double nice_step(double range, double target) {
  const double raw = range / target, p = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 2.5, 5.0})
    if (raw <= m * p) return m * p;
  return 10 * p;
}

std::string axis_number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", std::round(v * 1000) / 1000);
  return buf;
}

std::string millions(int64_t n) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1fM", double(n) / 1e6);
  return buf;
}

// "L3" for model.layers.3; the other parts as they are.
std::string short_layer(const std::string& layer) {
  const std::string prefix = "model.layers.";
  if (layer.rfind(prefix, 0) == 0) return "L" + layer.substr(prefix.size());
  if (layer == "embeddings") return "emb";
  return layer;
}

std::string point_tooltip(const TimelinePoint& t, int64_t points) {
  std::string s =
      str_cat("#", t.index, " of ", points, ": ", t.phase, t.layer.empty() ? "" : ", " + t.layer,
              "\n", t.op, "\ntotal ", format_bytes(t.total));
  for (auto it = kChartStack.rbegin(); it != kChartStack.rend(); ++it)
    if (t.bytes[size_t(*it)] != 0)
      s += str_cat("\n  ", mem_category_name(*it), " ", format_bytes(t.bytes[size_t(*it)]));
  s += str_cat("\nthis op: ", t.allocations, t.allocations == 1 ? " allocation" : " allocations",
               ", ", format_bytes(t.allocated_bytes), " allocated, ", format_bytes(t.freed_bytes),
               " freed");
  return s;
}

// One tooltip for points [begin, end): the highest in full, the others by name.
std::string group_tooltip(const std::vector<TimelinePoint>& tl, size_t begin, size_t end) {
  size_t top = begin;
  for (size_t i = begin; i < end; ++i)
    if (tl[i].total > tl[top].total) top = i;
  if (end - begin == 1) return point_tooltip(tl[top], int64_t(tl.size()));
  std::string s = str_cat("ops #", begin, "-#", end - 1, ", the highest:\n",
                          point_tooltip(tl[top], int64_t(tl.size())), "\nalso:");
  size_t listed = 0;
  for (size_t i = begin; i < end && listed < 3; ++i) {
    if (i == top) continue;
    s += "\n  " + tl[i].op;
    ++listed;
  }
  if (end - begin - 1 > listed) s += str_cat("\n  ... ", end - begin - 1 - listed, " more");
  return s;
}

// The outline of area k: a step per column from the baseline, back down at the right.
std::string area_path(const std::vector<ChartColumn>& cols, size_t k, const ChartLayout& l) {
  const std::string base = svg_number(l.y_of(0));
  std::string d = str_cat("M", svg_number(l.x_of(0)), ",", base), last_y = base;
  for (size_t i = 0; i < cols.size(); ++i) {
    const std::string y = svg_number(l.y_of(double(cols[i].tops[k])));
    if (y != last_y) d += "V" + y;
    d += "H" + svg_number(l.x_of(double(i + 1)));
    last_y = y;
  }
  return d + "V" + base + "Z";
}

std::string phase_bands(const MemoryProfile& p, const ChartLayout& l) {
  std::string out = "<g id=\"phases\">\n";
  const auto& tl = p.timeline;
  for (size_t b = 0; b < tl.size();) {
    size_t e = b;
    while (e < tl.size() && tl[e].phase == tl[b].phase) ++e;
    const double x0 = l.x_of(double(b)), x1 = l.x_of(double(e));
    out += rect(x0, l.top, x1 - x0, l.height, str_cat("fill=\"", phase_color(tl[b].phase), "\""));
    // Labels above the plot; a band too narrow for one (setup, an optimizer step that allocates
    // nothing) gets a smaller one beside it, toward the inside of the plot.
    if (x1 - x0 > 60)
      out += text((x0 + x1) / 2, l.top - 10, tl[b].phase,
                  "text-anchor=\"middle\" font-size=\"14\" font-weight=\"bold\" fill=\"#555\"");
    else if (b == 0 || e == tl.size())
      out += text(
          b == 0 ? x0 : x1, l.top - 10, b == 0 ? tl[b].phase + " >" : "< " + tl[b].phase,
          str_cat("text-anchor=\"", b == 0 ? "start" : "end", "\" font-size=\"11\" fill=\"#555\""));
    b = e;
  }
  return out + "</g>\n";
}

std::string grid_and_axes(const MemoryProfile& p, const ChartLayout& l) {
  std::string out = "<g id=\"axes\" font-size=\"12\" fill=\"#333\">\n";
  for (double v = 0; v <= l.max_bytes + 1; v += l.tick_bytes) {
    const double y = l.y_of(v);
    out += line(l.left, y, l.left + l.width, y, "stroke=\"#000\" stroke-opacity=\"0.12\"");
    out += text(l.left - 8, y + 4, str_cat(axis_number(v / l.unit_bytes), " ", l.unit),
                "text-anchor=\"end\"");
  }
  const double step = nice_step(double(l.points), 10);
  for (double i = 0; i <= double(l.points); i += step) {
    const double x = l.x_of(i), y = l.top + l.height;
    out += line(x, y, x, y + 5, "stroke=\"#333\"");
    out += text(x, y + 19, axis_number(i), "text-anchor=\"middle\"");
  }
  out += line(l.left, l.top + l.height, l.left + l.width, l.top + l.height, "stroke=\"#333\"");
  out += line(l.left, l.top, l.left, l.top + l.height, "stroke=\"#333\"");
  out += text(l.left + l.width / 2, l.top + l.height + 44,
              str_cat("ops of the step in the order they ran (", p.timeline.size(),
                      " points, one per op, each at its own high-water mark)"),
              "text-anchor=\"middle\" font-size=\"13\"");
  const double cy = l.top + l.height / 2;
  out += text(24, cy, str_cat("live memory (", l.unit, ")"),
              str_cat("text-anchor=\"middle\" font-size=\"13\" transform=\"rotate(-90 24 ",
                      svg_number(cy), ")\""));
  return out + "</g>\n";
}

std::string layer_lines(const MemoryProfile& p, const ChartLayout& l) {
  std::string out = "<g id=\"layers\" font-size=\"10\" fill=\"#444\">\n";
  std::string previous;
  double last_label_end = -1e9;
  for (size_t i = 0; i < p.timeline.size(); ++i) {
    const std::string& layer = p.timeline[i].layer;
    if (layer.empty() || layer == previous) continue;
    previous = layer;
    const double x = l.x_of(double(i));
    out += str_cat("<g><title>", escape(str_cat(layer, " from op #", i)), "</title>");
    out += line(x, l.top, x, l.top + l.height,
                "stroke=\"#222\" stroke-opacity=\"0.35\" stroke-width=\"0.7\"");
    // A label right of its line (left of it at the plot's right edge); one that would overlap
    // the previous label is left out, the line stays.
    const std::string label = short_layer(layer);
    const double label_width = 6.5 * double(label.size());
    const bool at_right_edge = x + 2 + label_width > l.left + l.width;
    const double label_start = at_right_edge ? x - 2 - label_width : x + 2;
    if (label_start > last_label_end + 4) {
      out += text(at_right_edge ? x - 2 : x + 2, l.top + 12, label,
                  at_right_edge ? "class=\"halo\" text-anchor=\"end\"" : "class=\"halo\"");
      last_label_end = label_start + label_width;
    }
    out += "</g>\n";
  }
  return out + "</g>\n";
}

std::string peak_mark(const MemoryProfile& p, const ChartLayout& l) {
  size_t at = 0;
  while (at < p.timeline.size() && p.timeline[at].total != p.peak_bytes) ++at;
  GDN_CHECK(at < p.timeline.size(), "memory chart: no timeline point reaches the peak ",
            p.peak_bytes);
  const TimelinePoint& t = p.timeline[at];
  const double x = (l.x_of(double(at)) + l.x_of(double(at + 1))) / 2, y = l.y_of(double(t.total));
  const bool right = x < l.left + 0.6 * l.width;
  const double tx = right ? x + 10 : x - 10;
  const std::string anchor = right ? "start" : "end";
  std::string out =
      str_cat("<g id=\"peak\" data-bytes=\"", p.peak_bytes, "\" data-point=\"", at, "\">\n");
  out += line(l.left, y, l.left + l.width, y,
              "stroke=\"#d62728\" stroke-opacity=\"0.6\" stroke-dasharray=\"2 3\"");
  out += str_cat("<circle cx=\"", svg_number(x), "\" cy=\"", svg_number(y),
                 "\" r=\"5\" fill=\"none\" stroke=\"#d62728\" stroke-width=\"2\"/>\n");
  out += text(tx, y - 24, "peak " + format_bytes(p.peak_bytes),
              str_cat("id=\"peak-label\" class=\"halo\" text-anchor=\"", anchor,
                      "\" font-size=\"15\" font-weight=\"bold\" fill=\"#d62728\""));
  out +=
      text(tx, y - 8, str_cat("at op #", at, ": ", t.op),
           str_cat("class=\"halo\" text-anchor=\"", anchor, "\" font-size=\"12\" fill=\"#222\""));
  return out + "</g>\n";
}

std::string budget_marks(const MemoryProfile& p, const ChartLayout& l) {
  if (p.budget_bytes <= 0) return "";
  std::string out = str_cat("<g id=\"budget\" data-bytes=\"", p.budget_bytes,
                            "\" font-size=\"12\" fill=\"#c00\">\n");
  // Labels at the plot's left, away from the peak's (usually in backward, on the right).
  const double xl = l.left + 6;
  const double yb = l.y_of(double(p.budget_bytes));
  out += line(l.left, yb, l.left + l.width, yb, "stroke=\"#c00\" stroke-width=\"1.5\"");
  out += text(xl, yb - 5,
              str_cat("budget ", format_bytes(p.budget_bytes), ": the step ",
                      p.fits() ? "fits" : "does not fit", " with the allowance"),
              "class=\"halo\" font-weight=\"bold\"");
  // The step must stay under the budget less the allowance (CUDA context, library workspaces).
  const int64_t room = p.budget_bytes - p.allowance_bytes;
  if (p.allowance_bytes > 0 && room > 0) {
    const double yr = l.y_of(double(room));
    out += line(l.left, yr, l.left + l.width, yr,
                "stroke=\"#c00\" stroke-dasharray=\"6 4\" stroke-opacity=\"0.8\"");
    out += text(xl, yr + 15,
                str_cat("budget less the allowance ", format_bytes(p.allowance_bytes), ": ",
                        format_bytes(room), " for the step"),
                "class=\"halo\"");
  }
  return out + "</g>\n";
}

std::string legend(const MemoryProfile& p, const ChartLayout& l) {
  const double x = l.left + l.width + 28;
  double y = l.top + 4;
  std::string out = "<g id=\"legend\" font-size=\"13\" fill=\"#222\">\n";
  out += text(x, y, "at the peak", "font-weight=\"bold\"");
  y += 14;
  for (auto it = kChartStack.rbegin(); it != kChartStack.rend(); ++it) {
    out += rect(x, y, 14, 14, str_cat("fill=\"", category_color(*it), "\""));
    out += text(x + 20, y + 12, mem_category_name(*it));
    out +=
        text(x + 230, y + 12, format_bytes(p.peak_by_category[size_t(*it)]), "text-anchor=\"end\"");
    y += 22;
  }
  out += line(x, y, x + 230, y, "stroke=\"#999\"");
  out += text(x + 20, y + 16, "total", "font-weight=\"bold\"");
  out +=
      text(x + 230, y + 16, format_bytes(p.peak_bytes), "text-anchor=\"end\" font-weight=\"bold\"");
  y += 44;
  out += text(x, y, "marks", "font-weight=\"bold\"");
  y += 18;
  for (const char* ph : {"forward", "backward", "optimizer"}) {
    out += rect(x, y - 11, 14, 14, str_cat("fill=\"", phase_color(ph), "\" stroke=\"#ccc\""));
    out += text(x + 20, y, str_cat(ph, " phase"));
    y += 20;
  }
  out += line(x + 7, y - 12, x + 7, y + 3, "stroke=\"#222\" stroke-opacity=\"0.5\"");
  out += text(x + 20, y, "a layer begins (L3: model.layers.3)");
  y += 20;
  out += str_cat("<circle cx=\"", svg_number(x + 7), "\" cy=\"", svg_number(y - 4),
                 "\" r=\"5\" fill=\"none\" stroke=\"#d62728\" stroke-width=\"2\"/>\n");
  out += text(x + 20, y, "the peak");
  y += 20;
  if (p.budget_bytes > 0) {
    out += line(x, y - 4, x + 14, y - 4, "stroke=\"#c00\" stroke-width=\"1.5\"");
    out += text(x + 20, y, "budget (dashed: less allowance)");
    y += 20;
  }
  y += 16;
  out += text(x, y, "hover a column for its ops", "fill=\"#666\" font-size=\"12\"");
  out += text(x, y + 16, "and their allocations", "fill=\"#666\" font-size=\"12\"");
  return out + "</g>\n";
}

std::string hover_columns(const MemoryProfile& p, const ChartLayout& l, double min_px) {
  std::string out = "<g id=\"hover\" fill=\"#000\" fill-opacity=\"0\">\n";
  const auto& tl = p.timeline;
  for (size_t b = 0; b < tl.size();) {
    size_t e = b + 1;
    while (e < tl.size() && l.x_of(double(e)) - l.x_of(double(b)) < min_px) ++e;
    const double x0 = l.x_of(double(b)), x1 = l.x_of(double(e));
    out += str_cat("<rect x=\"", svg_number(x0), "\" y=\"", svg_number(l.top), "\" width=\"",
                   svg_number(x1 - x0), "\" height=\"", svg_number(l.height), "\"><title>",
                   escape(group_tooltip(tl, b, e)), "</title></rect>\n");
    b = e;
  }
  return out + "</g>\n";
}

std::string chart_svg(const MemoryProfile& p, const std::string& title, double hover_px) {
  GDN_CHECK(!p.timeline.empty(), "memory chart: the profile has no timeline (record_timeline)");
  const ChartLayout l = memory_chart_layout(p);
  const std::vector<ChartColumn> cols = memory_chart_columns(p);
  std::string out =
      str_cat("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"", svg_number(kSvgWidth),
              "\" height=\"", svg_number(kSvgHeight), "\" viewBox=\"0 0 ", svg_number(kSvgWidth),
              " ", svg_number(kSvgHeight), "\" font-family=\"", kFont, "\">\n");
  out += str_cat("<title>", escape(title), ": memory of one training step</title>\n");
  // Labels over lines and areas get a white outline, so they stay readable.
  out +=
      "<style>.halo { paint-order: stroke; stroke: #fff; stroke-width: 3px; "
      "stroke-linejoin: round; }</style>\n";
  out += rect(0, 0, kSvgWidth, kSvgHeight, "fill=\"#fff\"");
  out += text(24, 34, str_cat(title, ": memory of one training step"),
              "font-size=\"21\" font-weight=\"bold\" fill=\"#111\"");
  out += text(24, 58,
              str_cat(millions(p.params), " parameters, batch ", p.batch, " x seq ", p.seq,
                      p.packing == "stream" ? "" : " (packed documents)", ", ", p.dtype,
                      ", checkpointing ", p.checkpointing, ", on ", p.device,
                      p.world_size > 1 ? str_cat(", one rank of ", p.world_size) : "", "; peak ",
                      format_bytes(p.peak_bytes), " during ", p.peak_phase),
              "font-size=\"14\" fill=\"#444\"");
  out += phase_bands(p, l);
  out += grid_and_axes(p, l);
  // Back to front: area k covers the plot from the baseline to tops[k], so the areas below
  // paint over the lower part of those above and each shows only its own band.
  out += "<g id=\"areas\">\n";
  for (size_t k = kChartStack.size(); k-- > 0;)
    out += str_cat("<path id=\"area-", mem_category_name(kChartStack[k]), "\" fill=\"",
                   category_color(kChartStack[k]), "\" d=\"", area_path(cols, k, l), "\"/>\n");
  out += "</g>\n";
  out += layer_lines(p, l);
  out += budget_marks(p, l);
  out += peak_mark(p, l);
  out += legend(p, l);
  out += hover_columns(p, l, hover_px);
  return out + "</svg>\n";
}

}  // namespace

std::string svg_number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", v);
  std::string s = buf;
  while (s.back() == '0') s.pop_back();
  if (s.back() == '.') s.pop_back();
  return s == "-0" ? "0" : s;
}

std::vector<ChartColumn> memory_chart_columns(const MemoryProfile& p) {
  std::vector<ChartColumn> cols;
  for (const TimelinePoint& t : p.timeline) {
    ChartColumn c;
    c.index = t.index;
    int64_t sum = 0;
    for (size_t k = 0; k < kChartStack.size(); ++k) {
      sum += t.bytes[size_t(kChartStack[k])];
      c.tops[k] = sum;
    }
    cols.push_back(c);
  }
  return cols;
}

ChartLayout memory_chart_layout(const MemoryProfile& p) {
  ChartLayout l;
  l.left = 96, l.top = 92, l.width = 1190, l.height = 700;
  l.points = std::max<int64_t>(1, int64_t(p.timeline.size()));
  int64_t highest = std::max<int64_t>(p.peak_bytes, p.budget_bytes);
  for (const TimelinePoint& t : p.timeline) highest = std::max(highest, t.total);
  const double gib = 1024.0 * 1024 * 1024;
  const bool small = double(highest) < gib;  // a test-sized step reads better in MiB
  l.unit = small ? "MiB" : "GiB";
  l.unit_bytes = small ? 1024.0 * 1024 : gib;
  // Headroom above the highest mark for the peak's label.
  const double span = std::max(1.0, double(highest) * 1.12) / l.unit_bytes;
  l.tick_bytes = nice_step(span, 7) * l.unit_bytes;
  l.max_bytes = std::ceil(std::max(1.0, double(highest) * 1.12) / l.tick_bytes) * l.tick_bytes;
  return l;
}

std::string memory_chart_svg(const MemoryProfile& p, const std::string& title) {
  return chart_svg(p, title, kSvgHoverPx);
}

std::string memory_chart_html(const MemoryProfile& p, const std::string& title) {
  // Plain inline script, nothing fetched: the wheel zooms around the pointer, a drag pans, a
  // double click resets; the SVG's own tooltips still show on hover.
  static const char* kScript = R"(<script>
(function () {
  var svg = document.querySelector('#chart svg');
  var W = svg.viewBox.baseVal.width, H = svg.viewBox.baseVal.height, v = [0, 0, W, H], drag = null;
  function show() { svg.setAttribute('viewBox', v.join(' ')); }
  function at(e) {
    var r = svg.getBoundingClientRect();
    return [v[0] + (e.clientX - r.left) / r.width * v[2], v[1] + (e.clientY - r.top) / r.height * v[3]];
  }
  function clamp() {
    v[2] = Math.min(W, v[2]); v[3] = Math.min(H, v[3]);
    v[0] = Math.max(0, Math.min(W - v[2], v[0])); v[1] = Math.max(0, Math.min(H - v[3], v[1]));
  }
  svg.addEventListener('wheel', function (e) {
    e.preventDefault();
    var p = at(e), f = e.deltaY < 0 ? 0.8 : 1.25;
    v = [p[0] - (p[0] - v[0]) * f, p[1] - (p[1] - v[1]) * f, v[2] * f, v[3] * f];
    clamp(); show();
  }, {passive: false});
  svg.addEventListener('mousedown', function (e) { drag = at(e); });
  window.addEventListener('mouseup', function () { drag = null; });
  svg.addEventListener('mousemove', function (e) {
    if (!drag) return;
    var p = at(e);
    v[0] += drag[0] - p[0]; v[1] += drag[1] - p[1];
    clamp(); show();
  });
  svg.addEventListener('dblclick', function () { v = [0, 0, W, H]; show(); });
})();
</script>
)";
  return str_cat("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>",
                 escape(title),
                 ": memory of one training step</title>\n<style>\nbody { margin: 12px; "
                 "font-family: sans-serif; }\n#chart svg { width: 100%; height: auto; "
                 "border: 1px solid #ddd; cursor: grab; }\n.hint { color: #555; font-size: 14px; "
                 "}\n</style>\n</head>\n<body>\n<p class=\"hint\">Scroll to zoom around the "
                 "pointer, drag to pan, double-click to reset; hover a column for its ops and "
                 "their allocations.</p>\n<div id=\"chart\">\n",
                 chart_svg(p, title, 0), "</div>\n", kScript, "</body>\n</html>\n");
}

}  // namespace gdn::train
