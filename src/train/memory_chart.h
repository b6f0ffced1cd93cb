// The picture of a profiled step's timeline (`gdn profile-memory --svg/--html`): the live bytes
// over the step's ops as areas stacked by category, the phases as bands, a line at each layer
// boundary, the peak (its value and op) and the budget. Hovering a column shows its ops and their
// allocations (<title> tooltips); the HTML page embeds the same SVG and adds zoom and pan.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "src/train/memory_profile.h"

namespace gdn::train {

// The stacking order, bottom to top: what lives through the whole step first.
extern const std::array<MemCategory, kNumMemCategories> kChartStack;

struct ChartColumn {
  int64_t index = 0;  // the timeline point
  // Cumulative bytes in kChartStack order: tops[k] is the top of the k-th area; tops.back() is
  // the point's total.
  std::array<int64_t, kNumMemCategories> tops{};
};
// One column per timeline point, as the SVG draws them.
std::vector<ChartColumn> memory_chart_columns(const MemoryProfile& p);

// Where the plot lies in the SVG (pixels) and how points and bytes map onto it.
struct ChartLayout {
  double left = 0, top = 0, width = 0, height = 0;
  int64_t points = 0;
  double max_bytes = 1;   // the top of the y axis
  double tick_bytes = 1;  // between the y axis' grid lines
  double unit_bytes = 1;  // of the axis' labels (GiB, or MiB for small steps)
  const char* unit = "GiB";
  double x_of(double point) const { return left + width * point / double(points); }
  double y_of(double bytes) const { return top + height * (1.0 - bytes / max_bytes); }
};
ChartLayout memory_chart_layout(const MemoryProfile& p);

// Coordinates as the SVG writes them (2 decimals, no trailing zeros).
std::string svg_number(double v);

// `title` heads the picture (e.g. the config's name). The profile must have its timeline.
std::string memory_chart_svg(const MemoryProfile& p, const std::string& title);
std::string memory_chart_html(const MemoryProfile& p, const std::string& title);

}  // namespace gdn::train
