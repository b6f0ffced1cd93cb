// `gdn train --trace FILE.json`: a few steps after warm-up recorded as spans
// (kernels/trace_events.h) and written in Chrome's trace-event format (open it in
// https://ui.perfetto.dev or chrome://tracing): one row per CPU thread that did work; on thread 0
// each step, its phases (data, forward, backward, clip, optimizer, log), the layers (module spans
// in forward, each module's backward nodes grouped in backward), the ops and kernels, the GEMMs
// with their FLOPs; on the OpenMP workers, their share of each parallel loop. Also a table of the
// ops by time.
#pragma once
#include <string>
#include <vector>

#include "kernels/trace_events.h"

namespace gdn::train {

// The traced steps, for the file's header and the table's shares.
struct TraceSummary {
  int64_t first_step = 0, steps = 0;
  double step_ms = 0;  // the traced steps' total wall time
};

// The trace-event JSON: {"traceEvents": [complete events "X" with args flops, GFLOP/s, allocs,
// detail; thread names "M"], "displayTimeUnit": "ms", "otherData": {...}}.
std::string chrome_trace_json(const std::vector<trace::Event>& events, const TraceSummary& s);

// The top ops of thread 0 by their own time (a span's time less the spans inside it): the op,
// calls, ms per step, share of the step, GFLOP/s where FLOPs are defined, allocator calls per
// step; then what no op span covers (the framework between them).
std::string trace_table(const std::vector<trace::Event>& events, const TraceSummary& s,
                        size_t top = 20);

}  // namespace gdn::train
