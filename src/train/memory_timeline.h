// The timeline of one profiled training step: a point per op, in the order the ops ran, with the
// live bytes per category at the op's own high-water mark, the op's name
// ("model.layers.3.attn.q_conv1d: causal_conv1d_silu backward"), its phase and its layer. Off
// unless a TimelineRecorder lives (only `gdn profile-memory` makes one): it observes the
// allocator (set_memory_observer) and names each change by the trace spans around it (modules,
// kernels and backward nodes, kernels/trace_events.h), captured while it records.
#pragma once
#include <array>
#include <atomic>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "src/core/allocator.h"

namespace gdn::train {

struct TimelinePoint {
  int64_t index = 0;
  // "<module path>: <op>": a kernel in forward, "<op> backward" for a backward node, a
  // " (recompute)" suffix for a checkpointed forward run again in backward; the module alone
  // where no op span is open (e.g. a projection on meta), the phase alone outside the model.
  std::string op;
  std::string phase;  // setup | forward | backward | optimizer
  std::string layer;  // "model.layers.3", "embeddings", "head", or "" outside the model
  std::array<int64_t, kNumMemCategories> bytes{};  // live per category at the op's high-water
  int64_t total = 0;                               // their sum
  int64_t allocations = 0;                         // allocator calls during the op
  int64_t allocated_bytes = 0, freed_bytes = 0;    // during the op
};

// [{index, op, phase, layer, bytes: {param, grad, ...}, total, allocations, allocated_bytes,
// freed_bytes}, ...]: the `timeline` of `gdn profile-memory --json`.
nlohmann::json timeline_json(const std::vector<TimelinePoint>& points);

// The part of the model a module path belongs to: "model.layers.N", "embeddings", "head" (final
// norm, LM head, loss), "other" for an empty path, else the path itself.
std::string layer_of_scope(const std::string& scope);

// Records every change of `device`'s live bytes from its construction (bytes relative to the
// stats then) until finish(). One at a time. When no trace capture is running it starts one to
// name the ops (and ends it in finish()); when one is, ops are named by module path alone.
class TimelineRecorder {
 public:
  explicit TimelineRecorder(Device device);
  ~TimelineRecorder();
  TimelineRecorder(const TimelineRecorder&) = delete;
  TimelineRecorder& operator=(const TimelineRecorder&) = delete;

  // The phase of the changes from now on (before the first call: "setup").
  void set_phase(const std::string& phase);
  // Stops recording; the points, consecutive changes of one op merged into one (a phase without
  // any change, such as the optimizer step on meta, is one point of the bytes it began with).
  std::vector<TimelinePoint> finish();

  struct Change;  // one allocator change (memory_timeline.cpp)

 private:
  static void observe(Device device, const MemoryStats& stats);
  void record(const MemoryStats& stats);
  void stop();

  Device device_;
  MemoryStats base_;
  int64_t previous_total_ = 0, previous_allocs_ = 0;
  std::vector<std::string> phases_{"setup"};
  std::vector<std::array<int64_t, kNumMemCategories>> phase_starts_{{}};  // live bytes then
  std::atomic<int> phase_{0};
  bool owns_capture_ = false, stopped_ = false;
  std::vector<Change> changes_;
};

}  // namespace gdn::train
