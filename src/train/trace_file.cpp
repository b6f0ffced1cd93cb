#include "src/train/trace_file.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

namespace gdn::train {

namespace {

using nlohmann::json;

// Thread 0's events with their own time: duration less that of the spans directly inside.
// Thread 0's worker spans (it is one of the OpenMP team) are its op's own work, not a child.
std::vector<double> self_times(const std::vector<trace::Event>& ev) {
  std::vector<double> self(ev.size(), 0);
  std::vector<size_t> open;  // indices of enclosing spans (events sorted by start per thread)
  for (size_t i = 0; i < ev.size(); ++i) {
    if (ev[i].thread != 0 || std::string(ev[i].category) == "worker") continue;
    const double start = ev[i].start_us;
    while (!open.empty() && ev[open.back()].start_us + ev[open.back()].duration_us <= start + 1e-3)
      open.pop_back();
    self[i] = ev[i].duration_us;
    if (!open.empty()) self[open.back()] -= ev[i].duration_us;
    open.push_back(i);
  }
  return self;
}

bool is_op(const trace::Event& e) {
  const std::string c = e.category;
  return c == "kernel" || c == "gemm" || c == "op";
}

}  // namespace

std::string chrome_trace_json(const std::vector<trace::Event>& events, const TraceSummary& s) {
  json out = json::array();
  std::set<int> threads;
  for (const trace::Event& e : events) {
    threads.insert(e.thread);
    json args = json::object();
    if (e.flops > 0) {
      args["flops"] = e.flops;
      if (e.duration_us > 0) args["gflops_per_s"] = e.flops / (e.duration_us * 1e3);
    }
    if (e.allocs > 0) args["allocs"] = e.allocs;
    if (!e.detail.empty()) args["detail"] = e.detail;
    out.push_back({{"name", e.name},
                   {"cat", e.category},
                   {"ph", "X"},
                   {"ts", e.start_us},
                   {"dur", e.duration_us},
                   {"pid", 1},
                   {"tid", e.thread},
                   {"args", args}});
  }
  for (int t : threads)
    out.push_back(
        {{"name", "thread_name"},
         {"ph", "M"},
         {"pid", 1},
         {"tid", t},
         {"args", {{"name", t == 0 ? std::string("main") : "worker " + std::to_string(t)}}}});
  out.push_back(
      {{"name", "process_name"}, {"ph", "M"}, {"pid", 1}, {"args", {{"name", "gdn train"}}}});
  json doc = {
      {"traceEvents", out},
      {"displayTimeUnit", "ms"},
      {"otherData", {{"first_step", s.first_step}, {"steps", s.steps}, {"step_ms", s.step_ms}}}};
  return doc.dump() + "\n";
}

std::string trace_table(const std::vector<trace::Event>& events, const TraceSummary& s,
                        size_t top) {
  struct Row {
    double self_us = 0, flops = 0, flop_us = 0;
    int64_t calls = 0, allocs = 0;
  };
  const std::vector<double> self = self_times(events);
  std::map<std::string, Row> rows;
  double ops_us = 0;
  int64_t all_allocs = 0;
  for (size_t i = 0; i < events.size(); ++i) {
    const trace::Event& e = events[i];
    if (e.thread != 0) continue;
    if (std::string(e.category) == "step") all_allocs += e.allocs;
    if (!is_op(e)) continue;
    Row& r = rows[e.name];
    r.self_us += self[i];
    r.calls += 1;
    r.allocs += e.allocs;
    if (e.flops > 0) {
      r.flops += e.flops;
      r.flop_us += e.duration_us;
    }
    ops_us += self[i];
  }
  std::vector<std::pair<std::string, Row>> sorted(rows.begin(), rows.end());
  std::sort(sorted.begin(), sorted.end(),
            [](const auto& a, const auto& b) { return a.second.self_us > b.second.self_us; });
  const double steps = double(std::max<int64_t>(s.steps, 1));
  const double step_us = s.step_ms * 1e3 / steps;
  std::string out;
  char line[512];
  std::snprintf(line, sizeof line, "%-44s %7s %10s %7s %10s %8s\n", "op (own time)", "calls",
                "ms/step", "share", "GFLOP/s", "allocs");
  out += line;
  for (size_t i = 0; i < sorted.size() && i < top; ++i) {
    const auto& [name, r] = sorted[i];
    const std::string rate =
        r.flop_us > 0 ? std::to_string(int64_t(r.flops / (r.flop_us * 1e3))) : std::string("");
    std::snprintf(line, sizeof line, "%-44.44s %7.0f %10.2f %6.1f%% %10s %8.0f\n", name.c_str(),
                  double(r.calls) / steps, r.self_us / steps / 1e3,
                  100 * r.self_us / steps / step_us, rate.c_str(), double(r.allocs) / steps);
    out += line;
  }
  double rest_us = 0;
  for (size_t i = top; i < sorted.size(); ++i) rest_us += sorted[i].second.self_us;
  if (rest_us > 0) {
    std::snprintf(line, sizeof line, "%-44s %7s %10.2f %6.1f%%\n", "(the other ops)", "",
                  rest_us / steps / 1e3, 100 * rest_us / steps / step_us);
    out += line;
  }
  const double outside = step_us * steps - ops_us;
  std::snprintf(line, sizeof line, "%-44s %7s %10.2f %6.1f%% %10s %8.0f\n",
                "(outside any op: framework, allocation)", "", outside / steps / 1e3,
                100 * outside / steps / step_us, "", double(all_allocs) / steps);
  out += line;
  std::snprintf(line, sizeof line, "step %.2f ms (steps %lld-%lld)\n", step_us / 1e3,
                (long long)s.first_step, (long long)(s.first_step + s.steps - 1));
  out += line;
  return out;
}

}  // namespace gdn::train
