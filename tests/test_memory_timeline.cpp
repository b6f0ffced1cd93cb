// The memory timeline of a profiled step and its picture: the timeline's highest total is the
// profile's peak, its points add up, it names phases, layers and ops (recomputes too); the SVG is
// well-formed XML, its peak label is the profile's peak, and every column of the stacked areas
// ends exactly at its point's total live bytes.
#include <gtest/gtest.h>

#include <cctype>
#include <cmath>
#include <set>

#include "src/train/memory_chart.h"
#include "src/train/memory_profile.h"
#include "tests/tiny_runs.h"

namespace gdn {
namespace {

// Hidden 64, 2 layers of 2 heads of 32, vocab 512, batch 2, with the given checkpointing.
train::RunConfig small(const std::string& checkpointing) {
  return train::parse_run_config(test::model_yaml({64, 2, 2, 32, 512}) +
                                     "train:\n  batch_size: 2\n  checkpointing: " + checkpointing +
                                     "\n",
                                 "small.yaml");
}

train::MemoryProfile profile(const std::string& checkpointing, const std::string& device = "meta") {
  return train::profile_training_step(small(checkpointing), device, 2, 64, 1, true);
}

// What is wrong with `s` as XML (enough of it for SVG), or "" when nothing: tags closed in order,
// attribute values quoted, no '<' in values, every '&' an entity.
std::string xml_problem(const std::string& s) {
  std::vector<std::string> open;
  auto name_at = [&](size_t& i) {
    const size_t start = i;
    while (i < s.size() && (std::isalnum(static_cast<unsigned char>(s[i])) || s[i] == '-' ||
                            s[i] == '_' || s[i] == ':' || s[i] == '.'))
      ++i;
    return s.substr(start, i - start);
  };
  auto entities_ok = [&](size_t from, size_t to) {
    for (size_t i = from; i < to; ++i) {
      if (s[i] != '&') continue;
      const size_t semi = s.find(';', i);
      if (semi == std::string::npos || semi > to || semi - i > 8) return false;
    }
    return true;
  };
  size_t i = 0;
  while (i < s.size()) {
    const size_t lt = s.find('<', i);
    if (!entities_ok(i, lt == std::string::npos ? s.size() : lt)) return "a bare '&' in text";
    if (lt == std::string::npos) break;
    i = lt + 1;
    if (s.compare(i, 3, "!--") == 0) {
      i = s.find("-->", i);
      if (i == std::string::npos) return "an unclosed comment";
      i += 3;
      continue;
    }
    const bool closing = s[i] == '/';
    if (closing) ++i;
    const std::string name = name_at(i);
    if (name.empty()) return "a tag without a name at " + std::to_string(lt);
    if (closing) {
      if (open.empty() || open.back() != name) return "</" + name + "> closes nothing open";
      open.pop_back();
      if (s[i] != '>') return "a malformed </" + name + ">";
      ++i;
      continue;
    }
    for (;;) {
      while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
      if (s.compare(i, 2, "/>") == 0) {
        i += 2;
        break;
      }
      if (i < s.size() && s[i] == '>') {
        open.push_back(name);
        ++i;
        break;
      }
      const std::string attr = name_at(i);
      if (attr.empty() || i + 1 >= s.size() || s[i] != '=' || (s[i + 1] != '"' && s[i + 1] != '\''))
        return "a malformed attribute in <" + name + "> at " + std::to_string(i);
      const size_t end = s.find(s[i + 1], i + 2);
      if (end == std::string::npos) return "an unterminated value in <" + name + ">";
      if (s.find('<', i + 2) < end) return "a '<' in a value of <" + name + ">";
      if (!entities_ok(i + 2, end)) return "a bare '&' in a value of <" + name + ">";
      i = end + 1;
    }
  }
  return open.empty() ? "" : "<" + open.back() + "> never closed";
}

// The value of attribute `attr` of the first element with id="id".
std::string attribute_of(const std::string& svg, const std::string& id, const std::string& attr) {
  const size_t at = svg.find("id=\"" + id + "\"");
  if (at == std::string::npos) return "";
  const size_t tag_end = svg.find('>', at), tag_start = svg.rfind('<', at);
  const std::string tag = svg.substr(tag_start, tag_end - tag_start);
  const size_t a = tag.find(" " + attr + "=\"");
  if (a == std::string::npos) return "";
  const size_t begin = a + attr.size() + 3;
  return tag.substr(begin, tag.find('"', begin) - begin);
}

// The height drawn over each column by an area path (M x,y then V y / H x steps): the y of the
// horizontal segment over each column's middle.
std::vector<double> column_heights(const std::string& d, const train::ChartLayout& l) {
  struct Segment {
    double x0, x1, y;
  };
  std::vector<Segment> segments;
  double x = 0, y = 0;
  for (size_t i = 0; i < d.size();) {
    const char op = d[i++];
    if (op == 'Z') continue;
    size_t used = 0;
    const double v = std::stod(d.substr(i), &used);
    i += used;
    if (op == 'M') {
      x = v;
      ++i;  // the comma
      y = std::stod(d.substr(i), &used);
      i += used;
    } else if (op == 'V') {
      y = v;
    } else if (op == 'H') {
      segments.push_back({x, v, y});
      x = v;
    }
  }
  std::vector<double> heights;
  for (int64_t c = 0; c < l.points; ++c) {
    const double mid = (l.x_of(double(c)) + l.x_of(double(c + 1))) / 2;
    double h = NAN;
    for (const Segment& s : segments)
      if (s.x0 <= mid && mid <= s.x1) h = s.y;
    heights.push_back(h);
  }
  return heights;
}

void expect_timeline_consistent(const train::MemoryProfile& p, const std::string& what) {
  SCOPED_TRACE(what);
  ASSERT_FALSE(p.timeline.empty());
  int64_t highest = 0;
  for (size_t i = 0; i < p.timeline.size(); ++i) {
    const train::TimelinePoint& t = p.timeline[i];
    EXPECT_EQ(t.index, int64_t(i));
    int64_t sum = 0;
    for (int64_t b : t.bytes) sum += b;
    EXPECT_EQ(sum, t.total) << t.op;
    EXPECT_FALSE(t.op.empty());
    highest = std::max(highest, t.total);
  }
  EXPECT_EQ(highest, p.peak_bytes);
  // The phases in the order they ran, each present (an optimizer step on meta allocates
  // nothing, and still has its point).
  std::vector<std::string> phases;
  for (const auto& t : p.timeline)
    if (phases.empty() || phases.back() != t.phase) phases.push_back(t.phase);
  EXPECT_EQ(phases, (std::vector<std::string>{"setup", "forward", "backward", "optimizer"}));
}

bool any_op(const train::MemoryProfile& p, const std::string& part, const std::string& phase) {
  for (const auto& t : p.timeline)
    if (t.phase == phase && t.op.find(part) != std::string::npos) return true;
  return false;
}

TEST(MemoryTimeline, OffUnlessAsked) {
  const auto p = train::profile_training_step(small("none"), "meta", 2, 64);
  EXPECT_TRUE(p.timeline.empty());
  EXPECT_FALSE(train::profile_json(p).contains("timeline"));
}

TEST(MemoryTimeline, PeakPhasesLayersAndOps) {
  for (const char* ckpt : {"none", "block", "kernel"}) {
    const auto p = profile(ckpt);
    expect_timeline_consistent(p, ckpt);
    std::set<std::string> layers;
    for (const auto& t : p.timeline) layers.insert(t.layer);
    for (const char* layer : {"embeddings", "model.layers.0", "model.layers.1", "head"})
      EXPECT_EQ(layers.count(layer), 1u) << ckpt << ": " << layer;
    EXPECT_TRUE(any_op(p, "model.layers.1.attn", "forward")) << ckpt;
    EXPECT_TRUE(any_op(p, "model.layers.1.attn: gated_delta_rule backward", "backward")) << ckpt;
    EXPECT_TRUE(any_op(p, "model.layers.0.mlp: swiglu backward", "backward")) << ckpt;
    // Checkpointed forwards run again in backward, under the block's full path.
    EXPECT_EQ(any_op(p, "model.layers.0.attn.q_proj (recompute)", "backward"),
              std::string(ckpt) != "none")
        << ckpt;
  }
}

TEST(MemoryTimeline, CpuAsMeta) {
  const auto meta = profile("block"), cpu = profile("block", "cpu");
  expect_timeline_consistent(cpu, "cpu");
  EXPECT_TRUE(any_op(cpu, "model.layers.1.attn: gated_delta_rule backward", "backward"));
  EXPECT_NEAR(double(cpu.timeline.size()), double(meta.timeline.size()),
              0.2 * double(meta.timeline.size()));
}

TEST(MemoryTimeline, JsonCarriesTheTimeline) {
  const auto p = profile("block");
  const auto j = train::profile_json(p);
  ASSERT_TRUE(j.contains("timeline"));
  ASSERT_EQ(j["timeline"].size(), p.timeline.size());
  int64_t highest = 0;
  for (const auto& t : j["timeline"]) {
    int64_t sum = 0;
    for (const char* c : {"param", "grad", "optim", "activation", "temp", "workspace"})
      sum += t["bytes"][c].get<int64_t>();
    EXPECT_EQ(sum, t["total"].get<int64_t>());
    for (const char* key : {"index", "op", "phase", "layer", "allocations"})
      EXPECT_TRUE(t.contains(key)) << key;
    highest = std::max(highest, t["total"].get<int64_t>());
  }
  EXPECT_EQ(highest, j["peak_bytes"].get<int64_t>());
}

TEST(MemoryChart, ColumnsStackToEachTotal) {
  for (const char* ckpt : {"none", "block"}) {
    const auto p = profile(ckpt);
    const auto cols = train::memory_chart_columns(p);
    ASSERT_EQ(cols.size(), p.timeline.size());
    for (size_t i = 0; i < cols.size(); ++i) {
      EXPECT_EQ(cols[i].tops.back(), p.timeline[i].total) << ckpt << " column " << i;
      int64_t sum = 0;
      for (size_t k = 0; k < train::kChartStack.size(); ++k) {
        sum += p.timeline[i].bytes[size_t(train::kChartStack[k])];
        EXPECT_EQ(cols[i].tops[k], sum);
      }
    }
  }
}

TEST(MemoryChart, SvgIsWellFormedAndDrawsTheColumns) {
  for (const char* ckpt : {"none", "block"}) {
    SCOPED_TRACE(ckpt);
    auto p = profile(ckpt);
    p.budget_bytes = p.peak_bytes * 2;
    p.allowance_bytes = p.peak_bytes / 4;
    const std::string svg = train::memory_chart_svg(p, "small");
    EXPECT_EQ(xml_problem(svg), "");
    EXPECT_EQ(svg.rfind("<svg", 0), 0u);
    // The peak: its mark carries the profile's bytes and its label says them.
    EXPECT_EQ(attribute_of(svg, "peak", "data-bytes"), std::to_string(p.peak_bytes));
    const size_t label = svg.find("id=\"peak-label\"");
    ASSERT_NE(label, std::string::npos);
    EXPECT_EQ(svg.substr(svg.find('>', label) + 1, 5 + format_bytes(p.peak_bytes).size()),
              "peak " + format_bytes(p.peak_bytes));
    EXPECT_EQ(attribute_of(svg, "budget", "data-bytes"), std::to_string(p.budget_bytes));
    // Every area is drawn at exactly its columns' tops; the topmost at each point's total.
    const auto l = train::memory_chart_layout(p);
    const auto cols = train::memory_chart_columns(p);
    for (size_t k = 0; k < train::kChartStack.size(); ++k) {
      const std::string id = std::string("area-") + mem_category_name(train::kChartStack[k]);
      const auto heights = column_heights(attribute_of(svg, id, "d"), l);
      ASSERT_EQ(heights.size(), cols.size()) << id;
      for (size_t i = 0; i < cols.size(); ++i)
        ASSERT_NEAR(heights[i], l.y_of(double(cols[i].tops[k])), 0.006) << id << " column " << i;
    }
    // One tooltip per column: this small step's columns are all wider than the grouping.
    size_t titles = 0;
    for (size_t at = svg.find("<g id=\"hover\"");
         (at = svg.find("<title>", at + 1)) != std::string::npos;)
      ++titles;
    EXPECT_EQ(titles, p.timeline.size());
  }
}

TEST(MemoryChart, HtmlEmbedsTheSvgAndFetchesNothing) {
  const auto p = profile("block");
  const std::string html = train::memory_chart_html(p, "small");
  const size_t begin = html.find("<svg"), end = html.find("</svg>");
  ASSERT_NE(begin, std::string::npos);
  ASSERT_NE(end, std::string::npos);
  EXPECT_EQ(xml_problem(html.substr(begin, end + 6 - begin)), "");
  EXPECT_NE(html.find("<script>"), std::string::npos);
  for (const char* fetch : {" src=", " href=", "@import", "url("})
    EXPECT_EQ(html.find(fetch), std::string::npos) << fetch;
}

TEST(MemoryChart, RefusesAProfileWithoutTimeline) {
  const auto p = train::profile_training_step(small("none"), "meta", 2, 64);
  EXPECT_THROW(train::memory_chart_svg(p, "small"), Error);
}

}  // namespace
}  // namespace gdn
