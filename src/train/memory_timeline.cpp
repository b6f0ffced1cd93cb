// Recording the timeline: the allocator observer appends one Change per allocation,
// deallocation or retag and drops a zero-length trace span (a marker) named by its index; after
// the step, each marker is placed among the module, kernel and backward spans of the capture (the
// same clock, the same thread), which name its op.
#include "src/train/memory_timeline.h"

#include <algorithm>
#include <atomic>
#include <limits>

#include "kernels/trace_events.h"
#include "src/autograd/node.h"
#include "src/core/error.h"

namespace gdn::train {

struct TimelineRecorder::Change {
  int phase = 0;
  std::string scope;  // the module scope of the allocating thread (names ops without a capture)
  std::array<int64_t, kNumMemCategories> bytes{};
  int64_t total = 0, delta = 0;
  bool allocation = false;
};

namespace {

std::atomic<TimelineRecorder*> g_recorder{nullptr};

const char* kMarker = "memory";  // the trace category of the markers
const std::string kBackwardSuffix = " (backward)";

bool starts_with(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

bool is_prefix_path(const std::string& prefix, const std::string& path) {
  return starts_with(path, prefix) && (path.size() == prefix.size() || path[prefix.size()] == '.');
}

std::string module_path_of(const std::string& span_name) {
  const size_t n = span_name.size(), k = kBackwardSuffix.size();
  if (n >= k && span_name.compare(n - k, k, kBackwardSuffix) == 0)
    return span_name.substr(0, n - k);
  return span_name;
}

// A module span inside another, as one path. Forward spans carry full paths; a checkpointed
// forward run again in backward carries paths relative to where the checkpoint began
// ("layers.1.attn" inside "model.layers.1" for a block, "attn.q_proj" for a kernel checkpoint),
// joined here to the outer path.
std::string join_paths(const std::string& outer, const std::string& inner) {
  if (outer.empty() || is_prefix_path(outer, inner)) return inner;
  for (size_t dot = outer.find('.'); dot != std::string::npos; dot = outer.find('.', dot + 1))
    if (is_prefix_path(outer.substr(dot + 1), inner)) return outer.substr(0, dot + 1) + inner;
  return outer + "." + inner;
}

// "model.layers.0.layers.0.attn" -> "model.layers.0.attn": a checkpointed block runs its forward
// again inside its own module scope, which names it twice.
std::string without_repeats(const std::string& path) {
  std::vector<std::string> parts;
  for (size_t start = 0;;) {
    const size_t dot = path.find('.', start);
    parts.push_back(path.substr(start, dot - start));
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  for (size_t i = 0; i < parts.size(); ++i)
    for (size_t k = 1; i + 2 * k <= parts.size(); ++k)
      if (std::equal(parts.begin() + long(i), parts.begin() + long(i + k),
                     parts.begin() + long(i + k))) {
        parts.erase(parts.begin() + long(i + k), parts.begin() + long(i + 2 * k));
        k = 0;  // look again from this position
      }
  return join(parts, ".");
}

bool is_op_span(const trace::Event& e) {
  const std::string c = e.category;
  return c == "kernel" || c == "gemm" || c == "backward";
}

struct OpName {
  std::string op, layer;
};

// The op of a change from the spans open around it (outermost first) and its thread's scope.
OpName name_op(const std::vector<const trace::Event*>& open, const std::string& scope,
               const std::string& phase) {
  std::string path, outermost;
  int innermost_module = -1;
  for (size_t i = 0; i < open.size(); ++i) {
    if (std::string(open[i]->category) != "module") continue;
    const std::string p = module_path_of(open[i]->name);
    path = join_paths(path, p);
    if (outermost.empty()) outermost = path;
    innermost_module = int(i);
  }
  if (innermost_module < 0) path = outermost = scope;
  path = without_repeats(path);
  // The op: the outermost op span inside the innermost module (a backward node, not the kernels
  // it runs); a forward module inside a backward node is a forward run again (checkpointing).
  const bool in_forward_module =
      innermost_module >= 0 &&
      module_path_of(open[size_t(innermost_module)]->name) == open[size_t(innermost_module)]->name;
  const trace::Event* op = nullptr;
  bool recompute = false;
  for (size_t i = 0; i < open.size(); ++i) {
    if (!is_op_span(*open[i])) continue;
    if (int(i) > innermost_module && !op) op = open[i];
    if (int(i) < innermost_module && std::string(open[i]->category) == "backward")
      recompute = in_forward_module;
  }
  std::string op_name;
  if (op) op_name = op->name + (std::string(op->category) == "backward" ? " backward" : "");
  OpName n;
  if (path.empty())
    n.op = op_name.empty() ? phase : op_name;
  else
    n.op = op_name.empty() ? path : path + ": " + op_name;
  if (recompute) n.op += " (recompute)";
  n.layer = outermost.empty() ? "" : layer_of_scope(outermost);
  return n;
}

// The spans open at each marker: markers and spans swept in time order with a stack of the
// spans still open (spans of one thread nest).
std::vector<OpName> name_changes(const std::vector<trace::Event>& events, size_t num_changes,
                                 const std::vector<std::string>& scopes,
                                 const std::vector<std::string>& phases) {
  std::vector<const trace::Event*> spans, markers;
  for (const auto& e : events) {
    if (std::string(e.category) == kMarker)
      markers.push_back(&e);
    else if (e.thread == 0 && (is_op_span(e) || std::string(e.category) == "module"))
      spans.push_back(&e);
  }
  auto by_start = [](const trace::Event* a, const trace::Event* b) {
    return a->start_us < b->start_us;
  };
  std::stable_sort(spans.begin(), spans.end(), by_start);
  std::stable_sort(markers.begin(), markers.end(), by_start);
  std::vector<OpName> names(num_changes);
  std::vector<const trace::Event*> open;
  size_t next = 0;
  auto close_before = [&](double t) {
    while (!open.empty() && open.back()->start_us + open.back()->duration_us < t) open.pop_back();
  };
  for (const trace::Event* m : markers) {
    while (next < spans.size() && spans[next]->start_us < m->start_us) {
      close_before(spans[next]->start_us);
      open.push_back(spans[next++]);
    }
    close_before(m->start_us);
    const size_t i = std::stoul(m->name);
    if (i < num_changes) names[i] = name_op(open, scopes[i], phases[i]);
  }
  return names;
}

}  // namespace

nlohmann::json timeline_json(const std::vector<TimelinePoint>& points) {
  nlohmann::json out = nlohmann::json::array();
  for (const TimelinePoint& p : points) {
    nlohmann::json bytes;
    for (int k = 0; k < kNumMemCategories; ++k)
      bytes[mem_category_name(MemCategory(k))] = p.bytes[size_t(k)];
    out.push_back({{"index", p.index},
                   {"op", p.op},
                   {"phase", p.phase},
                   {"layer", p.layer},
                   {"bytes", bytes},
                   {"total", p.total},
                   {"allocations", p.allocations},
                   {"allocated_bytes", p.allocated_bytes},
                   {"freed_bytes", p.freed_bytes}});
  }
  return out;
}

std::string layer_of_scope(const std::string& scope) {
  const std::string prefix = "model.layers.";
  if (starts_with(scope, prefix)) return scope.substr(0, scope.find('.', prefix.size()));
  if (starts_with(scope, "model.embeddings")) return "embeddings";
  if (starts_with(scope, "loss") || starts_with(scope, "lm_head") ||
      starts_with(scope, "model.norm"))
    return "head";
  return scope.empty() ? "other" : scope;
}

TimelineRecorder::TimelineRecorder(Device device) : device_(device) {
  TimelineRecorder* none = nullptr;
  GDN_CHECK(g_recorder.compare_exchange_strong(none, this),
            "a memory timeline is already being recorded");
  base_ = memory_stats(device);
  previous_total_ = base_.total;
  previous_allocs_ = base_.num_allocs;
  // A capture someone else runs (gdn train --trace) is left alone: ops are then named by scope.
  owns_capture_ = !trace::capturing();
  if (owns_capture_) trace::begin_capture();
  set_memory_observer(&TimelineRecorder::observe);
}

TimelineRecorder::~TimelineRecorder() {
  stop();
  if (owns_capture_) trace::end_capture();  // unfinished (an error in the step): dropped
}

void TimelineRecorder::set_phase(const std::string& phase) {
  const MemoryStats now = memory_stats(device_);
  std::array<int64_t, kNumMemCategories> bytes{};
  for (int k = 0; k < kNumMemCategories; ++k)
    bytes[size_t(k)] = now.current[size_t(k)] - base_.current[size_t(k)];
  phases_.push_back(phase);
  phase_starts_.push_back(bytes);
  phase_.store(int(phases_.size() - 1));
}

void TimelineRecorder::observe(Device device, const MemoryStats& stats) {
  TimelineRecorder* r = g_recorder.load(std::memory_order_acquire);
  if (r && device == r->device_) r->record(stats);
}

void TimelineRecorder::record(const MemoryStats& stats) {
  Change c;
  c.phase = phase_.load(std::memory_order_relaxed);
  c.scope = autograd::current_scope();
  for (int k = 0; k < kNumMemCategories; ++k)
    c.bytes[size_t(k)] = stats.current[size_t(k)] - base_.current[size_t(k)];
  c.total = stats.total - base_.total;
  c.delta = stats.total - previous_total_;
  c.allocation = stats.num_allocs != previous_allocs_;
  previous_total_ = stats.total;
  previous_allocs_ = stats.num_allocs;
  // The marker: a span of no length at this moment, on the trace's clock.
  if (owns_capture_) {
    trace::Span marker(kMarker, std::to_string(changes_.size()));
  }
  changes_.push_back(std::move(c));
}

void TimelineRecorder::stop() {
  if (stopped_) return;
  stopped_ = true;
  set_memory_observer(nullptr);
  g_recorder.store(nullptr);
}

std::vector<TimelinePoint> TimelineRecorder::finish() {
  stop();
  std::vector<std::string> scopes, phases;
  for (const Change& c : changes_) {
    scopes.push_back(c.scope);
    phases.push_back(phases_[size_t(c.phase)]);
  }
  std::vector<OpName> names(changes_.size());
  if (owns_capture_) {
    names = name_changes(trace::end_capture(), changes_.size(), scopes, phases);
    owns_capture_ = false;
  } else {
    for (size_t i = 0; i < changes_.size(); ++i) names[i] = name_op({}, scopes[i], phases[i]);
  }
  std::vector<TimelinePoint> points;
  std::vector<bool> phase_changed(phases_.size(), false);
  for (const Change& c : changes_) phase_changed[size_t(c.phase)] = true;
  size_t next_phase = 0;
  // A phase without changes still shows: one point of what was live when it began.
  auto add_quiet_phases = [&](size_t upto) {
    for (; next_phase < upto; ++next_phase) {
      if (phase_changed[next_phase]) continue;
      TimelinePoint p;
      p.index = int64_t(points.size());
      p.phase = phases_[next_phase];
      p.op = p.phase + ": no allocator calls";
      p.bytes = phase_starts_[next_phase];
      for (int64_t b : p.bytes) p.total += b;
      points.push_back(p);
    }
  };
  for (size_t i = 0; i < changes_.size(); ++i) {
    const Change& c = changes_[i];
    add_quiet_phases(size_t(c.phase));
    next_phase = std::max(next_phase, size_t(c.phase) + 1);
    const bool same_op =
        !points.empty() && points.back().op == names[i].op && points.back().phase == phases[i];
    if (!same_op) {
      TimelinePoint p;
      p.index = int64_t(points.size());
      p.op = names[i].op;
      p.phase = phases[i];
      p.layer = names[i].layer;
      p.total = std::numeric_limits<int64_t>::min();  // the first change sets the high-water
      points.push_back(p);
    }
    TimelinePoint& p = points.back();
    // The op's high-water mark: the first moment its total was highest.
    if (c.total > p.total) {
      p.total = c.total;
      p.bytes = c.bytes;
    }
    if (c.allocation) {
      ++p.allocations;
      p.allocated_bytes += c.delta;
    } else if (c.delta < 0) {
      p.freed_bytes -= c.delta;
    }
  }
  add_quiet_phases(phases_.size());
  changes_.clear();
  return points;
}

}  // namespace gdn::train
